"""Time travel: the `as_of` parameter and the SQL that answers "as it was at that moment".

The moment is an eventTime (when things happened, not when we heard of them), so a late
event about the past changes the past and nothing after it. At a moment T:
- a job's inputs and outputs are those of its latest run that started at or before T
  (readmodel.lineage_runs by started_at, then run_edges of that run), plus its static
  lineage (JobEvents) first seen at or before T;
- a dataset's schema is the latest `schema` observation at or before T
  (readmodel.schema_observations) of a run that did not end FAIL or ABORT, with its
  fields from dataset_versions;
- a job's field-level lineage is that of the same run (readmodel.column_lineage_runs);
- a dataset's names are those first seen by T: a name first seen later is not shown,
  counted or used as its display name (names joined by a rule stay joined in the past);
- a write is a successful one by T (run_edges.first_write_at, last_write_at), never an
  attempt of a run that failed.
Every fragment binds `%(as_of)s`; the ones that take a job are formatted with the SQL
expression of its id. A read without `as_of` answers with the same edges (the latest run's
of each job, and its static lineage), bound to NOW: "now" is "as of now" (issue 48).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from psycopg import AsyncConnection

from metastore.problems import ProblemError
from projections.common import key_probe, local_settings

EXAMPLE = "2026-11-24T09:00:00Z"
# The moment a read without `as_of` binds where it shares a fragment with the as-of read:
# the last one ingest accepts (eventTime years 1-9999), so every event counts.
NOW = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)
# The run id of static (JobEvent) field edges in column_lineage_runs
# (projections/column_lineage.py).
STATIC_RUN = "00000000-0000-0000-0000-000000000000"
AsOf = (
    Annotated[
        dt.datetime,
        Meta(
            tz=True,
            description="Answer as of this moment (RFC 3339, by eventTime): each job's "
            "inputs and outputs those of its latest run started at or before it, schemas "
            "their latest version then. Absent: now.",
            examples=[EXAMPLE],
        ),
    ]
    | None
)

# Before every eventTime ingest accepts: the window of view=cumulative without `since`.
EVER = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
View = Annotated[
    Literal["latest", "cumulative"],
    Meta(
        description="Which edges of a job count: `latest`, those of its latest run started "
        "by the moment answered (`as_of`, else now; with `since`, only if it started at or "
        "after it) and its static lineage (Marquez's latest job version); `cumulative`, "
        "those of every run it started from `since` to that moment (every run, without "
        "`since`) and its static lineage. Column lineage follows the same rule."
    ),
]
Since = (
    Annotated[
        dt.datetime,
        Meta(
            tz=True,
            description="Where the window of runs starts (RFC 3339, by eventTime; a run "
            "started at or after it counts, see `view`). Absent: the first event.",
            examples=[EXAMPLE],
        ),
    ]
    | None
)


class AsOfQuery(msgspec.Struct, frozen=True):
    """The query of a read that takes only `as_of`."""

    as_of: AsOf = None


# A graph read's window parameters; keyword-only, so a query struct that extends them keeps
# them last, where every graph read documents them.
class Viewed(msgspec.Struct, frozen=True, kw_only=True):
    view: View = "latest"
    since: Since = None


class AsOfViewed(msgspec.Struct, frozen=True, kw_only=True):
    as_of: AsOf = None
    view: View = "latest"
    since: Since = None


def window(view: str, since: dt.datetime | None) -> tuple[str, dt.datetime | None]:
    """(rule, start of the window) of `view` and `since`: the rule `latest`, `recent` (the
    latest run if it started at or after `since`) or `cumulative` (every run from `since`,
    else from the first event)."""
    if view == "latest":
        return ("latest", None) if since is None else ("recent", since)
    return "cumulative", since or EVER


# The run of job `{job}` that counts at T: its latest run started at or before T.
LATEST_RUN = """(
    SELECT lr.run_id FROM readmodel.lineage_runs lr
    WHERE lr.job_id = {job} AND lr.started_at <= %(as_of)s{since}
    ORDER BY lr.started_at DESC, lr.run_id DESC LIMIT 1)"""

# The runs of job `{job}` whose edges count at T in the cumulative view: those started from
# `%(since)s` to T.
WINDOW_RUNS = """(
    SELECT lr.run_id FROM readmodel.lineage_runs lr
    WHERE lr.job_id = {job} AND lr.started_at <= %(as_of)s AND lr.started_at >= %(since)s)"""

# The dataset names job `{job}` read ('input') or wrote ('output') at T: rows (namespace,
# name, lifecycle_state, lifecycle_time, run_id, last_seen): run_id, the run that made the
# edge (NULL: static lineage), last_seen the latest eventTime that named it there.
JOB_EDGES_AT = """(
    SELECT re.namespace, re.name, re.lifecycle_state, re.lifecycle_time, re.run_id,
           re.last_seen
    FROM readmodel.run_edges re
    WHERE {runs} AND re.direction = '{direction}'
  {union}
    SELECT s.namespace, s.name, s.lifecycle_state, s.lifecycle_time, NULL::uuid, s.last_seen
    FROM readmodel.job_edges s
    WHERE s.job_id = {job} AND s.direction = '{direction}' AND s.source = 'static'
      AND s.first_seen <= %(as_of)s)"""

# The leading columns of the primary keys of run_edges and job_edges (sql/projections).
RUN_EDGE_KEY = ("run_id", "direction", "namespace", "name")
JOB_EDGE_KEY = ("job_id", "direction", "namespace", "name")
# Whether the job_edges row `e` held at T (a superset over all time, checked edge by edge:
# the job's run at T has it, or it is static lineage declared by then): each run counted
# (`{runs}`, rows of run_id) probed at its run_edges row (common.key_probe).
EDGE_HELD = """CASE WHEN e.source = 'static' THEN e.first_seen <= %(as_of)s
    ELSE EXISTS (SELECT 1 FROM {runs} r CROSS JOIN LATERAL {probe} re
                 WHERE re.run_id = r.run_id AND re.direction = e.direction
                   AND re.namespace = e.namespace AND re.name = e.name{job}) END"""

# Observation `o` is of a run that ended FAIL or ABORT: no version (README "Which run
# writes"), at any moment.
FAILED_RUN = """SELECT 1 FROM readmodel.lineage_runs f
                WHERE f.run_id = o.run_id AND f.ended_state IN ('FAIL', 'ABORT')"""
# The fields_hash of the latest schema observation at or before `{moment}` (T unless
# given) under any of the names `{names}` (a FROM item of (namespace, name) rows), or NULL.
SCHEMA_AT = """(
    SELECT o.fields_hash FROM {names} n
    CROSS JOIN LATERAL (
        SELECT o.fields_hash, o.event_time, o.seq FROM readmodel.schema_observations o
        WHERE o.namespace = n.namespace AND o.name = n.name AND o.event_time <= {moment}
          AND NOT EXISTS ({FAILED_RUN})
        ORDER BY o.event_time DESC, o.seq DESC LIMIT 1) o
    ORDER BY o.event_time DESC, o.seq DESC LIMIT 1)"""


# How table-like dataset_names row `{n}` is, as projections.datasets.display_key ranks
# it (0: a TABLE symlink or a metastore's name a catalog rule derived, 1: a name an event
# used, 2: another; least first).
DISPLAY_RANK = """CASE WHEN {n}.symlink_type = 'TABLE'
                       OR ({n}.joined_by->>'role') = 'metastore' THEN 0
                  WHEN {n}.kind = 'emitted' THEN 1 ELSE 2 END"""
# The display name of dataset `{dataset}` at T: rows (namespace, name), one. Its most
# table-like name first seen by T (DISPLAY_RANK, then the first seen). Most often its
# display name now, seen by T already (the second element of its display_key): then the
# names are not read.
DISPLAY_NAME_AT = """(
    (SELECT d0.namespace, d0.name FROM readmodel.datasets d0
     WHERE d0.id = {dataset}
       AND (d0.display_key->>1)::bigint <= (extract(epoch FROM %(as_of)s) * 1000000)::bigint)
  UNION ALL
    (SELECT n.namespace, n.name
     FROM readmodel.dataset_names n
     WHERE n.dataset_id = {dataset} AND n.first_seen <= %(as_of)s
     ORDER BY {rank}, n.first_seen, n.namespace, n.name
     LIMIT 1)
    LIMIT 1)"""


# The state at T of run `lr` (a readmodel.lineage_runs row) from its job's events up to T
# (a terminal event wins, as in the runs projection; another job's events reusing the runId
# are not the run's): join it as `s`, then read the columns id, state, state_time,
# started_at, ended_at, duration_seconds of RUN_AT_COLUMNS. (Rows of run `{run}`: its event
# that counts at T, if any.) The run's latest event by T first (`t`: one probe a monthly
# partition of event_log_run_time, the entry at or before (run, T) if it is the run's;
# none, and the run has no state at T); then the first of:
# - its job's latest terminal event by T, from the run's ends alone (event_log_run_ends);
# - `t` if it is its job's and of a run state (with no terminal event by T, the latest);
# - (another job's event reusing the runId came last, or one without a type) its job's
#   latest run state by T among all of the run's events, as before that index.
# The run's events are found by a run index alone (an order only the run index gives, or
# OFFSET 0), then kept if its job's: with the job's name in the same scan PostgreSQL ANDed
# the job index in, every event of the job, for each run looked up. `t` is a row comparison
# for the same reason as common.FIRST_JOB_OF_RUNS: with `run_id =` the statistics said a
# run has one event a partition, and PostgreSQL sorted all of a streaming run's instead of
# merging the partitions' newest (20,001 events: 12 ms, against 0.2).
TERMINAL = "'COMPLETE', 'FAIL', 'ABORT'"
RUN_STATES = "'START', 'RUNNING', 'OTHER'"
# The job's (`lj`, the run's runs row) latest event of `{types}` by T among the run's (its
# events of those types, fenced: found by a run index).
_JOBS_LATEST = """(SELECT l.event_type, l.event_time FROM (
            SELECT l.event_type, l.event_time, l.seq, l.job_namespace, l.job_name
            FROM event_log l
            WHERE l.run_id = {run} AND l.event_time <= %(as_of)s
              AND l.event_type IN ({types})
            OFFSET 0) l
         WHERE l.job_namespace = lj.job_namespace AND l.job_name = lj.job_name
         ORDER BY l.event_time DESC, l.seq DESC LIMIT 1)"""
RUN_AT_LOG = f"""(
    SELECT x.event_type, x.event_time FROM (
        SELECT l.run_id, l.event_type, l.event_time, l.job_namespace, l.job_name
        FROM event_log l
        WHERE (l.run_id, l.event_time, l.seq) <= ({{run}}, %(as_of)s, 9223372036854775807)
          AND l.run_id IS NOT NULL
        ORDER BY l.run_id DESC, l.event_time DESC, l.seq DESC LIMIT 1) t
    JOIN readmodel.runs lj ON lj.id = {{run}} AND t.run_id = {{run}}
    CROSS JOIN LATERAL (
        {_JOBS_LATEST.format(types=TERMINAL, run="{run}")}
      UNION ALL
        SELECT t.event_type, t.event_time
        WHERE t.job_namespace = lj.job_namespace AND t.job_name = lj.job_name
          AND t.event_type IN ({RUN_STATES})
      UNION ALL
        {_JOBS_LATEST.format(types=RUN_STATES, run="{run}")}
        LIMIT 1) x)"""
# A run whose latest terminal event (lr.ended_at, by eventTime then seq, of its own job's
# events: projections/lineage.py) is by T had every terminal event by then, so that one
# counts at T: read from `lr`, not the log (a log read is a probe of every monthly
# partition and a heap row each event, 15 % of an as-of graph's SQL at 1,000,000 events).
# The log is read for a run running at T or ended after it (the two branches exclude each
# other: one row at most).
RUN_AT = """
LEFT JOIN LATERAL (
    SELECT lr.ended_state AS event_type, lr.ended_at AS event_time
    WHERE lr.ended_at <= %(as_of)s
  UNION ALL
    SELECT * FROM {log} l WHERE lr.ended_at IS NULL OR lr.ended_at > %(as_of)s
) s ON true"""


def run_at_join(run: str = "lr.run_id") -> str:
    """Joins `s`: the state at T of run `run` whose lineage_runs row (or none) is `lr`."""
    return RUN_AT.format(log=RUN_AT_LOG.format(run=run))


RUN_AT_JOIN = run_at_join()
# A run's state and end at T from its event that counts then (`s`, RUN_AT_JOIN; none:
# running since it started).
STATE_AT = "coalesce(s.event_type, 'RUNNING')"
_ENDED_AT = "CASE WHEN s.event_type IN ('COMPLETE', 'FAIL', 'ABORT') THEN s.event_time END"
RUN_AT_COLUMNS = f"""lr.run_id, {STATE_AT},
       coalesce(s.event_time, lr.started_at), lr.started_at, {_ENDED_AT},
       extract(epoch FROM {_ENDED_AT} - lr.started_at)::float8"""
# The same as a LatestRun in JSON (null when the job had not run by T).
RUN_AT_JSON = f"""CASE WHEN lr.run_id IS NOT NULL THEN json_build_object(
    'id', lr.run_id, 'state', {STATE_AT},
    'state_time', coalesce(s.event_time, lr.started_at), 'started_at', lr.started_at,
    'ended_at', {_ENDED_AT},
    'duration_seconds', extract(epoch FROM {_ENDED_AT} - lr.started_at)::float8) END"""


# The state at T of each run of `%(runs)s` that has a lineage_runs row: rows (run, state,
# ended_at), as RUN_AT_COLUMNS reads them. A statement of its own, planned once
# (run_states_at): RUN_AT_LOG reads the log three ways, each a probe of every monthly
# partition, and inside the statements planned for each request (a graph's edges, a
# dataset's runs: their arrays of ids are constants to the planner) it cost more to plan
# than to run, more with each month of the log.
RUN_STATES_AT = f"""
SELECT lr.run_id, {STATE_AT}, {_ENDED_AT}
FROM readmodel.lineage_runs lr{RUN_AT_JOIN}
WHERE lr.run_id = ANY(%(runs)s::uuid[])"""
# Its one plan: the runs by key, each run's events by the log's run indexes (no sequential
# scan whatever a table's statistics when the plan was made), kept once prepared.
_PLANNED_ONCE = local_settings(
    (("plan_cache_mode", "force_generic_plan"), ("enable_seqscan", "off"))
)


async def run_states_at(
    conn: AsyncConnection[Any], runs: Collection[uuid.UUID], as_of: dt.datetime
) -> dict[uuid.UUID, tuple[str, dt.datetime | None]]:
    """RUN_STATES_AT of `runs` (those with a lineage_runs row), planned once, in one round
    trip: each run's state and end at `as_of`."""
    if not runs:
        return {}
    give, back = _PLANNED_ONCE
    async with conn.cursor() as cur, conn.pipeline():
        await conn.execute(give)
        await cur.execute(RUN_STATES_AT, {"runs": list(runs), "as_of": as_of})
        await conn.execute(back)
        found = await cur.fetchall()
    return {run: (state, ended) for run, state, ended in found}


def latest_run_at_joins(job: str) -> str:
    """Joins `lr` and `s`: the latest run of job `job` started by T, and its state at T."""
    return f"LEFT JOIN readmodel.lineage_runs lr ON lr.run_id = {latest_run(job)}{RUN_AT_JOIN}"


def latest_run(job: str, since: bool = False) -> str:
    """`since`: only a run started at or after `%(since)s` (the `recent` rule)."""
    return LATEST_RUN.format(job=job, since=" AND lr.started_at >= %(since)s" if since else "")


RULES = ("latest", "recent", "cumulative")


def _runs(job: str, rule: str) -> str:
    """The condition on run_edges `re` that its run counts by `rule` (window)."""
    if rule == "cumulative":
        return f"re.job_id = {job} AND re.run_id IN {WINDOW_RUNS.format(job=job)}"
    return f"re.run_id = {latest_run(job, since=rule == 'recent')}"


def job_edges_at(job: str, direction: str, union: str = "UNION", rule: str = "latest") -> str:
    """`union`: UNION ALL where the caller removes duplicates itself (a UNION per job
    builds a hash table each time). `rule`: of `window` (cumulative: a row per run of the
    window that has the edge)."""
    runs = _runs(job, rule)
    return JOB_EDGES_AT.format(job=job, runs=runs, direction=direction, union=union)


# Whether the job_edges row `e` holds now: asof.NOW's EDGE_HELD by the `latest` rule, kept by
# the fold (job_edges.held_now, projections/lineage.py), so a read as of now looks up no run.
HELD_NOW = "e.held_now"


def edge_held(job: str = "e.job_id", rule: str = "latest", now: bool = False) -> str:
    """Whether job_edges row `e` held at `%(as_of)s` by `rule`; `now`: at asof.NOW, for
    the statements of a read without `as_of` (the same rows, from the fold's flag for the
    `latest` rule)."""
    if now and rule == "latest":
        return HELD_NOW
    probe = key_probe(
        "readmodel.run_edges", "re", RUN_EDGE_KEY, "r.run_id, e.direction, e.namespace, e.name"
    )
    if rule == "cumulative":
        runs, of_job = WINDOW_RUNS.format(job=job), f" AND re.job_id = {job}"
    else:
        runs, of_job = latest_run(job, since=rule == "recent"), ""
    return EDGE_HELD.format(runs=runs, probe=probe, job=of_job)


def display_rank(n: str) -> str:
    return DISPLAY_RANK.format(n=n)


def display_name_at(dataset: str) -> str:
    return DISPLAY_NAME_AT.format(dataset=dataset, rank=display_rank("n"))


def schema_at(dataset: str, moment: str = "%(as_of)s") -> str:
    """The schema at `moment` of dataset `dataset` (any of its names)."""
    names = f"(SELECT namespace, name FROM readmodel.dataset_names WHERE dataset_id = {dataset})"
    return schema_at_names(names, moment)


def schema_at_names(names: str, moment: str = "%(as_of)s") -> str:
    """The schema at `moment` under the names of FROM item `names` (namespace, name)."""
    return SCHEMA_AT.format(names=names, moment=moment, FAILED_RUN=FAILED_RUN)


def check_seen(
    kind: str, id_: uuid.UUID, first_seen: dt.datetime, as_of: dt.datetime | None
) -> None:
    """404 for a job or dataset asked about as of a moment before its first event."""
    if as_of is not None and first_seen > as_of:
        raise ProblemError(
            404,
            f"{kind} {id_} did not exist as of {as_of.isoformat()}: its first event is "
            f"from {first_seen.isoformat()}",
            kind="not-yet",
        )
