"""Projection `lineage`: job <-> dataset edges, per run and per job, with first/last seen,
and which of them are writes.

Run events give run edges (and the job edges behind them, source 'run'); JobEvents give
static lineage (job edges with source 'static'). Everything here is a min/max over the
events, so the tables are upserts that never need to read first.

A write is a successful one: a run writes every output it named (in any of its events)
when it COMPLETEs, and a STREAMING job's RUNNING event writes the outputs it names
(FoldEvent.writes), unless the run ends FAIL or ABORT: its latest terminal event (by
eventTime, then seq: the runs projection's state) decides, so a run that COMPLETEs and
then FAILs wrote nothing. It only attempted its outputs: its edges stay, its failure is
kept as the edge's latest attempt. A run's events and outputs can arrive in different
batches, in any order, so the upserts keep what does not depend on the others (the writing
events' times, the completions, the latest terminal event) and statements settle the rest
from what is stored: a run edge's write times (SETTLE_RUN_WRITES), the job edges' latest
write, found again among the job's runs where its run no longer writes (RESETTLE_JOB_WRITES),
and latest attempt. So the tables are the same whatever the arrival order.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg

from metastore.pgarray import uuid_array
from projections.common import (
    FAILED_STATES,
    INDEX_PROBES_ONLY,
    TERMINAL_STATES,
    FoldEvent,
    columns_of,
    key_probe,
    planner_without,
    row_param,
    rows_select,
    run_facts,
)

NAME = "lineage"
# 2: lifecycle_state of each edge; 3: writes (completed runs) and failed attempts; 4: a run
# that ends FAIL or ABORT wrote nothing (run_edges.first_writing, lineage_runs.ended_state);
# 5: another job's events reusing a runId are left out (common.run_owners); 6: job_edges.held_now
VERSION = 6
TABLES = ("run_edges", "job_edges", "lineage_runs")

# The lifecycle state of an edge: the latest `lifecycleStateChange` its events reported
# (by eventTime; a later report wins, one without the facet changes nothing).
_LIFECYCLE = """
    lifecycle_state = CASE WHEN excluded.lifecycle_time >= t.lifecycle_time
        OR t.lifecycle_time IS NULL THEN coalesce(excluded.lifecycle_state, t.lifecycle_state)
        ELSE t.lifecycle_state END,
    lifecycle_time = CASE WHEN excluded.lifecycle_time >= t.lifecycle_time
        OR t.lifecycle_time IS NULL THEN coalesce(excluded.lifecycle_time, t.lifecycle_time)
        ELSE t.lifecycle_time END"""


def _latest(columns: tuple[str, ...]) -> str:
    """SET clauses keeping the greater tuple of `columns` (the first NULL: none yet)."""
    fresh = ", ".join(f"excluded.{c}" for c in columns)
    stored = ", ".join(f"t.{c}" for c in columns)
    newer = f"(t.{columns[0]} IS NULL OR ({fresh}) > ({stored}))"
    return ",".join(
        f"\n    {c} = CASE WHEN {newer} AND excluded.{columns[0]} IS NOT NULL "
        f"THEN excluded.{c} ELSE t.{c} END"
        for c in columns
    )


EDGE_TIMES = ("timestamptz", "timestamptz", "text", "timestamptz")
_WRITE_TIMES = ("timestamptz",) * 4
RUN_EDGE_TYPES = ("uuid", "uuid", "text", "text", "text", *EDGE_TIMES, *_WRITE_TIMES)
# The write times as this batch alone gives them (most often right: SETTLE_RUN_WRITES then
# finds nothing to change, so an edge is written once).
UPSERT_RUN_EDGES = f"""
INSERT INTO run_edges AS t (run_id, job_id, direction, namespace, name, first_seen, last_seen,
    lifecycle_state, lifecycle_time, first_writing, last_writing, first_write_at,
    last_write_at)
{rows_select(RUN_EDGE_TYPES)}
ON CONFLICT (run_id, direction, namespace, name) DO UPDATE SET
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen),
    first_writing = least(t.first_writing, excluded.first_writing),
    last_writing = greatest(t.last_writing, excluded.last_writing),
    first_write_at = least(t.first_write_at, excluded.first_write_at),
    last_write_at = greatest(t.last_write_at, excluded.last_write_at),{_LIFECYCLE}
"""
WRITE = ("last_write_at", "last_write_run")
ATTEMPT = ("attempt_at", "attempt_run", "attempt_state")
_LATEST_WRITE, _LATEST_ATTEMPT = _latest(WRITE), _latest(ATTEMPT)
_LATEST_FAILURE = _latest(("failed_at", "failed_state"))
_LATEST_END = _latest(("ended_at", "ended_seq", "ended_state"))
JOB_EDGE_TYPES = (
    "uuid", "text", "text", "text", "text", *EDGE_TIMES,
    "timestamptz", "uuid", "timestamptz", "uuid", "text", "boolean",
)  # fmt: skip
# held_now as this batch guesses it (static lineage; an edge of the job's latest run in
# the batch): most often right, so SETTLE_HELD finds nothing to change; where it is not (a
# later run stored before), SETTLE_HELD puts it right.
UPSERT_JOB_EDGES = f"""
INSERT INTO job_edges AS t (job_id, direction, namespace, name, source, first_seen, last_seen,
    lifecycle_state, lifecycle_time, {", ".join(WRITE)}, {", ".join(ATTEMPT)}, held_now)
{rows_select(JOB_EDGE_TYPES)}
ON CONFLICT (job_id, direction, namespace, name, source) DO UPDATE SET
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen),{_LIFECYCLE},{_LATEST_WRITE},
    {_LATEST_ATTEMPT.lstrip()},
    held_now = t.held_now OR excluded.held_now
"""
# started_at: the earliest START, else the earliest event of the run. The completion
# (first and last COMPLETE) and the latest failure (FAIL or ABORT, and which).
LINEAGE_RUN_TYPES = (
    "uuid", "uuid", "timestamptz", "timestamptz", "boolean",
    "timestamptz", "timestamptz", "timestamptz", "text", "bigint", "text",
)  # fmt: skip
UPSERT_LINEAGE_RUNS = f"""
INSERT INTO lineage_runs AS t (run_id, job_id, started_at, ended_at, has_start,
    first_complete, last_complete, failed_at, failed_state, ended_seq, ended_state)
{rows_select(LINEAGE_RUN_TYPES)}
ON CONFLICT (run_id) DO UPDATE SET
    started_at = CASE
        WHEN t.has_start = excluded.has_start THEN least(t.started_at, excluded.started_at)
        WHEN excluded.has_start THEN excluded.started_at
        ELSE t.started_at END,
    has_start = t.has_start OR excluded.has_start,
    first_complete = least(t.first_complete, excluded.first_complete),
    last_complete = greatest(t.last_complete, excluded.last_complete),{_LATEST_FAILURE},
    {_LATEST_END.lstrip()}
"""
# The batch's runs' output edges (each with its `edge`, its ctid), found by primary key, run
# by run (fenced by OFFSET 0 under INDEX_PROBES_ONLY): with a fresh store's statistics the
# planner read every output edge instead, through run_edges_job by its second column alone
# for a live batch's few runs (SETTLE_RUN_WRITES: 12-17 ms a batch of 50 events at 20,000
# events; docs/PERFORMANCE.md, "the lag's tail: the settle of run edges, again"), or
# compared each job edge with each of the batch's (the job edges' settles: 1.3 s a batch
# of 700 runs at 30,000 events); a cost that grew with the store.
_BATCH_OUTPUTS = """unnest(%(runs)b::uuid[]) AS r(run_id)
CROSS JOIN LATERAL (
    SELECT v.ctid AS edge, v.* FROM run_edges v
    WHERE v.run_id = r.run_id AND v.direction = 'output' OFFSET 0) v"""
# A run's completion writes all its outputs, those named in other batches included; a run
# that ended FAIL or ABORT wrote none.
ENDED_FAILED = "lr.ended_state IN ('FAIL', 'ABORT')"
FIRST_WRITE = (
    f"CASE WHEN {ENDED_FAILED} THEN NULL ELSE least(v.first_writing, lr.first_complete) END"
)
LAST_WRITE = (
    f"CASE WHEN {ENDED_FAILED} THEN NULL ELSE greatest(v.last_writing, lr.last_complete) END"
)
SETTLE_RUN_WRITES = f"""
UPDATE run_edges t SET first_write_at = {FIRST_WRITE}, last_write_at = {LAST_WRITE}
FROM {_BATCH_OUTPUTS}
CROSS JOIN LATERAL (
    SELECT lr.ended_state, lr.first_complete, lr.last_complete FROM lineage_runs lr
    WHERE lr.run_id = r.run_id OFFSET 0) lr
WHERE t.ctid = v.edge
  AND (v.first_write_at, v.last_write_at) IS DISTINCT FROM ({FIRST_WRITE}, {LAST_WRITE})
"""
# run_edges' and job_edges' primary keys (sql/projections/lineage.sql)
_RUN_EDGE_KEY = ("run_id", "direction", "namespace", "name")
_JOB_EDGE_KEY = ("job_id", "direction", "namespace", "name", "source")


def _its_job_edge(output: str) -> str:
    """A run's output edge's (`output`) job edge, `j.edge` its ctid, by job_edges' primary
    key (common.key_probe): given as equalities, a fresh store's statistics made the planner
    probe job_edges_dataset and filter by job, every job that ever wrote the table (20,000
    for a table 20,000 Trino queries wrote) for each edge."""
    key = f"{output}.job_id, 'output', {output}.namespace, {output}.name, 'run'"
    columns = ", ".join(f"k.{c}" for c in _JOB_EDGE_KEY)
    probe = key_probe("job_edges", "k", _JOB_EDGE_KEY, key, select=f"k.ctid AS edge, {columns}")
    return f"CROSS JOIN LATERAL (SELECT k.edge FROM {probe} k WHERE ({columns}) = ({key})) j"


# A job edge whose latest write was by one of the batch's runs that no longer writes it
# (it ended FAIL or ABORT after all): the latest write among the job's runs again.
RESETTLE_JOB_WRITES = f"""
UPDATE job_edges t SET last_write_at = x.at, last_write_run = x.run
FROM {_BATCH_OUTPUTS}
{_its_job_edge("v")}
LEFT JOIN LATERAL (
    SELECT o.last_write_at AS at, o.run_id AS run FROM run_edges o
    WHERE o.namespace = v.namespace AND o.name = v.name AND o.direction = 'output'
      AND o.job_id = v.job_id AND o.last_write_at IS NOT NULL
    ORDER BY o.last_write_at DESC, o.run_id DESC LIMIT 1) x ON true
WHERE v.last_write_at IS NULL AND t.ctid = j.edge AND t.last_write_run = v.run_id
"""
# A job edge's latest write, and latest failed attempt, over the batch's runs' edges (those
# stored before too: the upsert had this batch's own).
SETTLE_JOB_WRITES = f"""
UPDATE job_edges t SET last_write_at = x.at, last_write_run = x.run
FROM (
    SELECT DISTINCT ON (v.job_id, v.namespace, v.name) v.job_id, v.namespace, v.name,
           v.last_write_at AS at, v.run_id AS run
    FROM {_BATCH_OUTPUTS}
    WHERE v.last_write_at IS NOT NULL
    ORDER BY v.job_id, v.namespace, v.name, v.last_write_at DESC, v.run_id DESC
) x
{_its_job_edge("x")}
WHERE t.ctid = j.edge
  AND (t.last_write_at IS NULL OR (x.at, x.run) > (t.last_write_at, t.last_write_run))
"""
SETTLE_JOB_ATTEMPTS = f"""
UPDATE job_edges t SET attempt_at = x.at, attempt_run = x.run, attempt_state = x.state
FROM (
    SELECT DISTINCT ON (v.job_id, v.namespace, v.name) v.job_id, v.namespace, v.name,
           lr.failed_at AS at, v.run_id AS run, lr.failed_state AS state
    FROM {_BATCH_OUTPUTS}
    CROSS JOIN LATERAL (
        SELECT lr.failed_at, lr.failed_state FROM lineage_runs lr
        WHERE lr.run_id = r.run_id AND lr.failed_at IS NOT NULL OFFSET 0) lr
    ORDER BY v.job_id, v.namespace, v.name, lr.failed_at DESC, v.run_id DESC,
             lr.failed_state DESC
) x
{_its_job_edge("x")}
WHERE t.ctid = j.edge
  AND (t.attempt_at IS NULL
       OR (x.at, x.run, x.state) > (t.attempt_at, t.attempt_run, t.attempt_state))
"""

# Which job edges are held now (job_edges.held_now): static lineage, and the edges of each
# job's latest run (by started_at, then run id: asof.LATEST_RUN). For each job whose runs
# this batch folded, from what is stored after its upserts: the held edges its latest run
# does not have are let go (found by job_edges_held, not among every edge the job ever had),
# the latest run's edges not held yet are held. Each job looked up by index alone (OFFSET 0
# under INDEX_PROBES_ONLY), as the settling statements above; the run's edge by its primary
# key (common.key_probe; the planner otherwise took run_edges_dataset, every run that
# ever named the table: 20,000 for a table 20,000 Trino queries wrote).
_LATEST_OF_JOB = """unnest(%(jobs)b::uuid[]) AS j(job_id)
CROSS JOIN LATERAL (
    SELECT lr.run_id FROM lineage_runs lr WHERE lr.job_id = j.job_id
    ORDER BY lr.started_at DESC, lr.run_id DESC LIMIT 1) l"""
SETTLE_HELD_OFF = f"""
UPDATE job_edges t SET held_now = false
FROM {_LATEST_OF_JOB}
CROSS JOIN LATERAL (
    SELECT h.ctid AS edge, h.direction, h.namespace, h.name FROM job_edges h
    WHERE h.job_id = j.job_id AND h.held_now AND h.source = 'run' OFFSET 0) h
LEFT JOIN LATERAL {
    key_probe(
        "run_edges",
        "re",
        _RUN_EDGE_KEY,
        "l.run_id, h.direction, h.namespace, h.name",
        select="re.run_id, re.direction, re.namespace, re.name",
    )
} re
  ON (re.run_id, re.direction, re.namespace, re.name)
     = (l.run_id, h.direction, h.namespace, h.name)
WHERE t.ctid = h.edge AND re.run_id IS NULL
"""
SETTLE_HELD_ON = f"""
UPDATE job_edges t SET held_now = true
FROM {_LATEST_OF_JOB}
CROSS JOIN LATERAL (
    SELECT re.direction, re.namespace, re.name FROM run_edges re
    WHERE re.run_id = l.run_id OFFSET 0) re
CROSS JOIN LATERAL {
    key_probe(
        "job_edges",
        "h",
        _JOB_EDGE_KEY,
        "j.job_id, re.direction, re.namespace, re.name, 'run'",
        select="h.ctid AS edge, h.held_now, h.job_id, h.direction, h.namespace, h.name, h.source",
    )
} h
WHERE t.ctid = h.edge AND NOT h.held_now
  AND (h.job_id, h.direction, h.namespace, h.name, h.source)
      = (j.job_id, re.direction, re.namespace, re.name, 'run')
"""

DIRECTIONS = {"input": "input", "output": "output"}


def _span(
    spans: dict[Any, list[Any]], key: Any, when: dt.datetime, lifecycle: str | None
) -> list[Any]:
    """[first_seen, last_seen, lifecycle_state, lifecycle_time, ...] of an edge."""
    span = spans.get(key)
    if span is None:
        span = spans[key] = [when, when, lifecycle, when if lifecycle else None]
        return span
    span[0], span[1] = min(span[0], when), max(span[1], when)
    if lifecycle and (span[3] is None or when >= span[3]):
        span[2], span[3] = lifecycle, when
    return span


def _later(span: list[Any], at: int, value: tuple[Any, ...]) -> None:
    """Sets span[at:at + len(value)] to `value` when that is the greater (a max)."""
    current = span[at : at + len(value)]
    if current[0] is None or value > tuple(current):
        span[at : at + len(value)] = value


RunKey = tuple[uuid.UUID, str, str, str]  # (run, direction, namespace, name)


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    # A runId that two jobs report (producers do reuse them) is the run of the job of its
    # first event: the other job's events with it are left out, edges and all.
    # (asked of the log once a batch for every fold: common.run_facts)
    facts = run_facts(cur, events)
    owners = {run: fact.job_id for run, fact in facts.items() if fact.job_id is not None}
    run_edges: dict[RunKey, list[Any]] = {}  # + [first_write_at, last_write_at]
    run_jobs: dict[RunKey, uuid.UUID] = {}
    job_edges: dict[tuple[uuid.UUID, str, str, str, str], list[Any]] = {}
    # run -> [job, started_at, ended_at, has_start, first_complete, last_complete,
    #         failed_at, failed_state, ended_seq, ended_state]
    runs: dict[uuid.UUID, list[Any]] = {}
    for event in events:
        jid = event.job_id
        if event.kind == "dataset" or jid is None:
            continue
        when = event.event_time
        is_run = event.kind == "run" and event.run_id is not None
        if is_run and owners.setdefault(event.run_id, jid) != jid:  # type: ignore[arg-type]
            continue
        source = "run" if is_run else "static"
        for ref in event.refs:
            direction = DIRECTIONS[ref.role]
            job_key = (jid, direction, ref.namespace, ref.name, source)
            _span(job_edges, job_key, when, ref.lifecycle)
            if is_run:
                assert event.run_id is not None
                run_key = (event.run_id, direction, ref.namespace, ref.name)
                run_jobs.setdefault(run_key, jid)
                span = _span(run_edges, run_key, when, ref.lifecycle)
                if len(span) == 4:
                    span += [None, None, None, None]
                if event.writes and direction == "output":
                    span[4] = when if span[4] is None else min(span[4], when)
                    span[5] = when if span[5] is None else max(span[5], when)
        if is_run:
            assert event.run_id is not None
            fold_lineage_run(runs, event.run_id, jid, event)
    # Each job's latest run in this batch (by started_at, then run id): its edges, and
    # static lineage, are inserted held (SETTLE_HELD checks against what is stored).
    latest: dict[uuid.UUID, tuple[dt.datetime, uuid.UUID]] = {}
    for rid, run in runs.items():
        if run[0] not in latest or (run[1], rid) > latest[run[0]]:
            latest[run[0]] = (run[1], rid)
    for (job, direction, namespace, name, source), span in job_edges.items():
        # the latest write and attempt, of this batch's runs (below), and held_now
        span += [None] * 5
        span.append(
            source == "static"
            or (job in latest and (latest[job][1], direction, namespace, name) in run_edges)
        )
    # The runs whose edges' writes may have changed: an end, or outputs, in this batch.
    touched = {rid for rid, r in runs.items() if r[2] is not None}
    touched.update(rid for rid, direction, _, _ in run_edges if direction == "output")
    for (rid, direction, namespace, name), span in run_edges.items():
        if direction != "output":
            continue
        run = runs[rid]
        if run[9] not in FAILED_STATES:
            span[6] = min((t for t in (span[4], run[4]) if t is not None), default=None)
            span[7] = max((t for t in (span[5], run[5]) if t is not None), default=None)
        # The job edge's latest write and attempt as this batch's runs give them go in its
        # upsert, so the settling statements find those rows settled instead of writing them
        # a second time in the batch (a tuple and index entries more for each).
        job = run_jobs[(rid, direction, namespace, name)]
        job_span = job_edges[(job, direction, namespace, name, "run")]
        if span[7] is not None:
            _later(job_span, 4, (span[7], rid))
        if run[6] is not None:
            _later(job_span, 6, (run[6], rid, run[7]))
    if run_edges:
        edge_runs, directions, namespaces, names, *spans = columns_of(run_edges)
        columns = [edge_runs, list(run_jobs.values()), directions, namespaces, names, *spans]
        cur.execute(UPSERT_RUN_EDGES, row_param(RUN_EDGE_TYPES, columns))
    if job_edges:
        cur.execute(UPSERT_JOB_EDGES, row_param(JOB_EDGE_TYPES, columns_of(job_edges)))
    if runs:
        cur.execute(
            UPSERT_LINEAGE_RUNS,
            row_param(LINEAGE_RUN_TYPES, [list(runs), *zip(*runs.values(), strict=True)]),
        )
    if runs:
        with planner_without(cur, *INDEX_PROBES_ONLY, plan_once=True):
            if touched:
                # (what an earlier batch stored: a completion or outputs folded before)
                # (each array encoded once for its four statements: a list was dumped by
                # psycopg element by element for each, 4 % of a live batch's Python)
                settle = {"runs": uuid_array(touched)}
                cur.execute(SETTLE_RUN_WRITES, settle)
                cur.execute(RESETTLE_JOB_WRITES, settle)
                cur.execute(SETTLE_JOB_WRITES, settle)
                cur.execute(SETTLE_JOB_ATTEMPTS, settle)
            held = {"jobs": uuid_array(latest)}
            cur.execute(SETTLE_HELD_OFF, held)
            cur.execute(SETTLE_HELD_ON, held)


def fold_lineage_run(
    runs: dict[uuid.UUID, list[Any]], run_id: uuid.UUID, jid: uuid.UUID, event: FoldEvent
) -> None:
    when = event.event_time
    state = event.event_type
    is_start = state == "START"
    ended = when if state in TERMINAL_STATES else None
    row = runs.get(run_id)
    if row is None:
        row = runs[run_id] = [jid, when, None, is_start, None, None, None, None, None, None]
    elif row[3] == is_start:
        row[1] = min(row[1], when)
    elif is_start:
        row[1], row[3] = when, True
    if ended is not None and (row[2] is None or (when, event.seq) > (row[2], row[8])):
        row[2], row[8], row[9] = when, event.seq, state
    if state == "COMPLETE":
        row[4] = when if row[4] is None else min(row[4], when)
        row[5] = when if row[5] is None else max(row[5], when)
    elif state in FAILED_STATES:
        _later(row, 6, (when, state))
