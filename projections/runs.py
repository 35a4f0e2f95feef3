"""Projection `runs`: one row per runId, the same whatever order its events arrive in.

State: a terminal event (COMPLETE, FAIL, ABORT) always beats START/RUNNING/OTHER, and
among events of the same rank the latest by eventTime (then seq) wins, so a late START
never undoes a COMPLETE. Root runs follow the parent chain (`root_path`: the runs above,
nearest first); when a run learns its parent after its children were folded, the children's
root is moved up with it. A chain is followed MAX_PARENT_DEPTH runs up at most, and stops
where it would come back to a run it passed (a cycle); both are counted. So a run's root
depends only on the runs at most that far above it, and a chain that grows upwards batch
by batch moves only the runs that close to its top: folding it is linear in its length.
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import psycopg

from metastore.metrics import PARENT_CHAINS_CUT
from metastore.pgarray import uuid_array
from projections import cadence, failing
from projections.common import (
    FACETS_DECODER,
    INDEX_PROBES_ONLY,
    TERMINAL_STATES,
    Facets,
    FoldEvent,
    facet,
    json_text,
    loading_cursor,
    merge_facets,
    parent_ref,
    parse_time,
    planner_without,
    row_param,
    rows_select,
    run_owners,
    text,
)

NAME = "runs"
# 2: facets json; 3: index runs_started; 4: index runs_namespace; 5: root_path; 6: facets
# over LARGE_FACET_BYTES left in the log; 7: index runs_state_time; 8: another job's events
# reusing a runId are not that run's (common.run_owners); 9: job_cadence (each job's
# cadence learned from its runs), failing_spans (when each job was failing), indexes
# runs_job_started and runs_namespace_failed
VERSION = 9
TABLES = ("runs", "job_cadence", "failing_spans")

COLUMNS = (
    "id",
    "job_id",
    "job_namespace",
    "job_name",
    "state",
    "state_time",
    "started_at",
    "ended_at",
    "nominal_start",
    "nominal_end",
    "error_message",
    "parent_run_id",
    "parent_job_namespace",
    "parent_job_name",
    "root_run_id",
    "root_path",
    "facets",
    "facet_times",
    "first_seen",
    "last_seen",
    "first_seq",
    "state_rank",
    "state_seq",
)
TYPES = (
    "uuid",
    "uuid",
    "text",
    "text",
    "text",
    "timestamptz",
    "timestamptz",
    "timestamptz",
    "timestamptz",
    "timestamptz",
    "text",
    "uuid",
    "text",
    "text",
    "uuid",
    "uuid[]",  # (as an array literal: see `write`)
    "json",
    "jsonb",
    "timestamptz",
    "timestamptz",
    "bigint",
    "smallint",
    "bigint",
)
JSON_COLUMNS = frozenset({"facets", "facet_times"})

# facets as text: decoded to name -> raw JSON, never to Python objects (see common.Facets)
SELECT_RUNS = (
    f"SELECT {', '.join('facets::text AS facets' if c == 'facets' else c for c in COLUMNS)} "
    "FROM runs WHERE id = ANY(%b::uuid[])"
)
SELECT_PATHS = "SELECT id, root_path FROM runs WHERE id = ANY(%b::uuid[])"
UPSERT = f"""
INSERT INTO runs ({", ".join(COLUMNS)})
{rows_select(TYPES)}
ON CONFLICT (id) DO UPDATE SET
{", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])}
"""
# How many runs up a parent chain is followed (the `parent` facets' runs, or the root a
# facet names): past it, a run's root is the run this many links above it. Real
# hierarchies (an Airflow DAG run, its task, the Spark application and its jobs) are a
# handful deep; the bound keeps a crafted chain of any length linear to fold.
MAX_PARENT_DEPTH = 100

# The tops (runs that were the top of their chain, or not folded yet) that now have runs
# above them, whose new path (`tail`) holds a run below them: a cycle through stored runs,
# whose paths `move_roots` cuts in Python.
SELECT_CYCLIC = """
SELECT DISTINCT root_run_id FROM runs
WHERE id = ANY(%b::uuid[]) AND root_run_id = ANY(%b::uuid[]) AND id <> root_run_id
"""
# The stored runs below each other top (those whose root it was; not those whose path is
# full: their root is further down) get its new path after theirs, up to the bound; the
# count of those cut by it comes back. (In the server: only the few tops' paths travel.)
# Each top's runs are found by runs_root, top by top (fenced by OFFSET 0), and updated by
# their ctid: with statistics from when a few roots held every run, the planner read all
# of runs_root instead, testing each run against the batch's ids and every top (0.6 s a
# batch that moved nothing, at 30,000 runs).
TOP_TYPES = ("uuid", "uuid[]")
EXTEND_PATHS = f"""
WITH tops(top, tail) AS ({rows_select(TOP_TYPES)}),
moved AS (
    UPDATE runs SET root_path = n.path, root_run_id = n.path[cardinality(n.path)]
    FROM tops
    CROSS JOIN LATERAL (
        SELECT old.ctid AS row, old.root_path FROM runs old
        WHERE old.root_run_id = tops.top AND old.id <> tops.top
          AND cardinality(old.root_path) < {MAX_PARENT_DEPTH} AND old.id <> ALL(%b::uuid[])
        OFFSET 0) old
    CROSS JOIN LATERAL (SELECT (old.root_path || tops.tail)[1:{MAX_PARENT_DEPTH}] AS path) n
    WHERE runs.ctid = old.row
    RETURNING cardinality(old.root_path) + cardinality(tops.tail) > {MAX_PARENT_DEPTH} AS cut
)
SELECT count(*) FILTER (WHERE cut) FROM moved
"""
SELECT_BELOW = f"""
SELECT id, root_path FROM runs
WHERE root_run_id = ANY(%b::uuid[]) AND id <> root_run_id
  AND cardinality(root_path) < {MAX_PARENT_DEPTH}
"""
MOVE_TYPES = ("uuid", "uuid", "uuid[]")
MOVE_ROOTS = f"""
UPDATE runs SET root_run_id = m.root_run_id, root_path = m.root_path
FROM ({rows_select(MOVE_TYPES)}) AS m(id, root_run_id, root_path)
WHERE runs.id = m.id
"""


def state_rank(event_type: str | None) -> int:
    if event_type in TERMINAL_STATES:
        return 2
    return 0 if event_type is None else 1


Loaded = dict[uuid.UUID, dict[str, Any]]


def load(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> Loaded:
    """The stored rows of the runs the batch names (see fold.fold_pipelined)."""
    run_ids = {e.run_id for e in events if e.kind == "run" and e.run_id is not None}
    if not run_ids:
        return {}
    with loading_cursor(cur) as dcur:
        dcur.execute(SELECT_RUNS, (uuid_array(run_ids),))
        rows: Loaded = {r["id"]: r for r in dcur.fetchall()}
    for loaded in rows.values():
        loaded["facets"] = FACETS_DECODER.decode(loaded["facets"])
    return rows


def apply(cur: psycopg.Cursor[Any], events: list[FoldEvent], rows: Loaded) -> None:
    """Folds the batch into the loaded rows, moves roots, writes the rows back."""
    old_paths = {rid: r["root_path"] for rid, r in rows.items()}
    old_starts = {rid: r["started_at"] or r["first_seen"] for rid, r in rows.items()}
    owners = run_owners({rid: r["job_id"] for rid, r in rows.items()}, events)
    for event in events:
        if event.kind != "run" or event.run_id is None:
            continue
        if event.job_id != owners[event.run_id]:
            continue  # another job's event reusing the runId: not this run's
        row = rows.get(event.run_id)
        if row is None:
            row = rows[event.run_id] = new_run(event)
        fold_run_event(row, event)
    if not rows:
        return
    explicit_roots = {rid: derive_from_facets(row) for rid, row in rows.items()}
    resolve_roots(cur, rows, explicit_roots)
    # Runs that were the top of their chain (or not folded yet) and now have a run above.
    tops = [rid for rid, row in rows.items() if row["root_path"] and not old_paths.get(rid)]
    if tops:
        move_roots(cur, rows, tops)
    write(cur, list(rows.values()))
    cadence.learn(cur, {row["job_id"] for row in rows.values()})
    failing.refold(cur, refold_since(rows, old_starts))


def refold_since(rows: Loaded, old_starts: dict[uuid.UUID, Any]) -> dict[uuid.UUID, Any]:
    """Per job, the earliest start (before or after the batch) of its runs the batch folded."""
    since: dict[uuid.UUID, Any] = {}
    for rid, row in rows.items():
        start = row["started_at"] or row["first_seen"]
        start = min(start, old_starts.get(rid, start))
        job = row["job_id"]
        since[job] = min(since.get(job, start), start)
    return since


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    apply(cur, events, load(cur, events))


def new_run(event: FoldEvent) -> dict[str, Any]:
    assert event.job_namespace is not None and event.job_name is not None
    return {
        "id": event.run_id,
        "job_id": event.job_id,
        "job_namespace": event.job_namespace,
        "job_name": event.job_name,
        "state": "OTHER",
        "state_time": event.event_time,
        "started_at": None,
        "ended_at": None,
        "nominal_start": None,
        "nominal_end": None,
        "error_message": None,
        "parent_run_id": None,
        "parent_job_namespace": None,
        "parent_job_name": None,
        "root_run_id": event.run_id,
        "root_path": None,
        "facets": {},
        "facet_times": {},
        "first_seen": event.event_time,
        "last_seen": event.event_time,
        "first_seq": event.seq,
        "state_rank": -1,
        "state_seq": -1,
    }


def fold_run_event(row: dict[str, Any], event: FoldEvent) -> None:
    when = event.event_time
    row["first_seen"] = min(row["first_seen"], when)
    row["last_seen"] = max(row["last_seen"], when)
    row["first_seq"] = min(row["first_seq"], event.seq)
    rank = state_rank(event.event_type)
    if (rank, when, event.seq) > (row["state_rank"], row["state_time"], row["state_seq"]):
        row["state"] = event.event_type or "OTHER"
        row["state_rank"], row["state_time"], row["state_seq"] = rank, when, event.seq
    if event.event_type == "START":
        row["started_at"] = when if row["started_at"] is None else min(row["started_at"], when)
    if rank == 2:
        row["ended_at"] = when if row["ended_at"] is None else max(row["ended_at"], when)
    merge_facets(row["facets"], row["facet_times"], event.run_facets, event.order)


def derive_from_facets(row: dict[str, Any]) -> uuid.UUID | None:
    """Sets the columns read from the merged run facets; returns the parent facet's root."""
    facets = row["facets"]
    nominal = facet(facets, "nominalTime") or {}
    row["nominal_start"] = parse_time(nominal.get("nominalStartTime"))
    row["nominal_end"] = parse_time(nominal.get("nominalEndTime"))
    error = facet(facets, "errorMessage") or {}
    row["error_message"] = text(error.get("message"))
    parent = parent_ref(facets)
    if parent is None or parent.run_id == row["id"]:
        row["parent_run_id"] = row["parent_job_namespace"] = row["parent_job_name"] = None
        return None
    row["parent_run_id"] = parent.run_id
    row["parent_job_namespace"] = parent.job_namespace
    row["parent_job_name"] = parent.job_name
    return parent.root_run_id


class Walk:
    """Parent chains followed up to MAX_PARENT_DEPTH runs, without recursion: the batch's
    rows by their `parent` facet (or the root it names), other runs by their stored path."""

    def __init__(
        self,
        rows: dict[uuid.UUID, dict[str, Any]],
        explicit: dict[uuid.UUID, uuid.UUID | None],
        stored: dict[uuid.UUID, list[uuid.UUID]],
    ) -> None:
        self.rows, self.explicit, self.stored = rows, explicit, stored
        self.cut = {"depth": 0, "cycle": 0}

    def path(self, rid: uuid.UUID) -> list[uuid.UUID]:
        """The runs above `rid`, nearest first; the last is its root ([]: it is its own)."""
        path: list[uuid.UUID] = []
        seen = {rid}
        current = rid
        while True:
            if current in self.rows:
                given = self.explicit.get(current)
                if given is not None:  # the root the facet names ends the walk
                    return self.extend(path, seen, [] if given == current else [given])
                parent = self.rows[current]["parent_run_id"]
                if parent is None:
                    return path
                if not self.step(path, seen, parent):
                    return path
                current = parent
            else:  # a run folded before (its path is stored), or not seen yet (its own root)
                return self.extend(path, seen, self.stored.get(current) or [])

    def extend(
        self, path: list[uuid.UUID], seen: set[uuid.UUID], more: list[uuid.UUID]
    ) -> list[uuid.UUID]:
        """`path` followed by `more`, up to a cycle or the depth bound."""
        for run in more:
            if not self.step(path, seen, run):
                break
        return path

    def step(self, path: list[uuid.UUID], seen: set[uuid.UUID], run: uuid.UUID) -> bool:
        """Appends `run` to `path` unless that closes a cycle or passes the bound (counted)."""
        if run in seen:
            self.cut["cycle"] += 1
            return False
        if len(path) >= MAX_PARENT_DEPTH:
            self.cut["depth"] += 1
            return False
        path.append(run)
        seen.add(run)
        return True

    def count(self) -> None:
        for reason, runs in self.cut.items():
            if runs:
                PARENT_CHAINS_CUT.labels(reason=reason).inc(runs)


def resolve_roots(
    cur: psycopg.Cursor[Any],
    rows: dict[uuid.UUID, dict[str, Any]],
    explicit: dict[uuid.UUID, uuid.UUID | None],
) -> None:
    """Sets root_path and root_run_id of every row: the runs above it, and the last of them
    (itself when none), within MAX_PARENT_DEPTH and up to a cycle."""
    outside = {
        r["parent_run_id"]
        for r in rows.values()
        if r["parent_run_id"] is not None and r["parent_run_id"] not in rows
    }
    stored: dict[uuid.UUID, list[uuid.UUID]] = {}
    if outside:
        with loading_cursor(cur) as dcur:
            dcur.execute(SELECT_PATHS, (uuid_array(outside),))
            stored = {row["id"]: row["root_path"] or [] for row in dcur.fetchall()}
    walk = Walk(rows, explicit, stored)
    for rid, row in rows.items():
        path = walk.path(rid)
        row["root_path"] = path or None
        row["root_run_id"] = path[-1] if path else rid
    walk.count()


def move_roots(
    cur: psycopg.Cursor[Any], rows: dict[uuid.UUID, dict[str, Any]], tops: list[uuid.UUID]
) -> None:
    """Extends the paths of the stored runs whose root was one of `tops` (which now have
    runs above them) by the top's new path, within the bound: each such run is moved at
    most MAX_PARENT_DEPTH times over its life, so a chain growing upwards stays linear."""
    tails = {top: rows[top]["root_path"] for top in tops}
    with loading_cursor(cur) as dcur:
        above = uuid_array({run for tail in tails.values() for run in tail})
        dcur.execute(SELECT_CYCLIC, (above, uuid_array(tops)))
        cyclic = {row["root_run_id"] for row in dcur.fetchall()}
        plain = [top for top in tops if top not in cyclic]
        if plain:
            columns: list[list[Any]] = [plain, [_array(tails[top]) for top in plain]]
            with planner_without(cur, *INDEX_PROBES_ONLY, plan_once=True):
                dcur.execute(EXTEND_PATHS, (*row_param(TOP_TYPES, columns), uuid_array(rows)))
                row = dcur.fetchone()
            if row and row["count"]:
                PARENT_CHAINS_CUT.labels(reason="depth").inc(row["count"])
        if not cyclic:
            return
        dcur.execute(SELECT_BELOW, (uuid_array(cyclic),))
        below = [(r["id"], r["root_path"]) for r in dcur.fetchall() if r["id"] not in rows]
    if not below:
        return
    walk = Walk({}, {}, {})
    moved: list[list[Any]] = []
    for rid, path in below:
        extended = walk.extend(list(path), {rid, *path}, tails[path[-1]] or [])
        moved.append([rid, extended[-1], _array(extended)])
    walk.count()
    with planner_without(cur, *INDEX_PROBES_ONLY, plan_once=True):
        cur.execute(MOVE_ROOTS, row_param(MOVE_TYPES, list(zip(*moved, strict=True))))


def _array(values: list[uuid.UUID] | None) -> str | None:
    """A uuid[] as the array literal `rows_select` casts (None: NULL)."""
    return "{" + ",".join(map(str, values)) + "}" if values else None


# A run facet larger than this (Spark's logical plan: 50-500 KB) is stored as IN_LOG: the
# API reads it from the event that set it (facet_times says which) when a run is asked
# for. Not the facets the fold reads back (derive_from_facets).
LARGE_FACET_BYTES = 8 * 1024
IN_LOG = msgspec.Raw(b'{"_metastore":"in the event log"}')
FOLD_READS = frozenset({"nominalTime", "errorMessage", "parent"})


def stored_facets(facets: Facets) -> str:
    """The merged facets as the runs table keeps them: large ones left in the log."""
    return json_text(
        {
            name: IN_LOG if len(value) > LARGE_FACET_BYTES and name not in FOLD_READS else value
            for name, value in facets.items()
        }
    )


def write(cur: psycopg.Cursor[Any], rows: list[dict[str, Any]]) -> None:
    columns = [
        [stored_facets(r[c]) for r in rows]
        if c == "facets"
        else [json_text(r[c]) for r in rows]
        if c in JSON_COLUMNS
        else [_array(r[c]) for r in rows]
        if c == "root_path"
        else [r[c] for r in rows]
        for c in COLUMNS
    ]
    cur.execute(UPSERT, row_param(TYPES, columns))
