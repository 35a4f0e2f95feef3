"""Projection `runs`: one row per runId, the same whatever order its events arrive in.

State: a terminal event (COMPLETE, FAIL, ABORT) always beats START/RUNNING/OTHER, and
among events of the same rank the latest by eventTime (then seq) wins, so a late START
never undoes a COMPLETE. Root runs follow the parent chain; when a run learns its parent
after its children were folded, the children's root is moved up with it.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from metastore.pgarray import uuid_array
from projections.common import (
    FACETS_DECODER,
    INDEX_PROBES_ONLY,
    TERMINAL_STATES,
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
    text,
)

NAME = "runs"
VERSION = 4  # 2: facets json; 3: index runs_started; 4: index runs_namespace
TABLES = ("runs",)

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
SELECT_ROOTS = "SELECT id, root_run_id FROM runs WHERE id = ANY(%b::uuid[])"
UPSERT = f"""
INSERT INTO runs ({", ".join(COLUMNS)})
{rows_select(TYPES)}
ON CONFLICT (id) DO UPDATE SET
{", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])}
"""
# Runs whose root was a run that now has a root above it (its parent arrived late).
MOVE_ROOTS = """
UPDATE runs SET root_run_id = m.new_root
FROM unnest(%s::uuid[], %s::uuid[]) AS m(old_root, new_root)
WHERE runs.root_run_id = m.old_root AND runs.id <> m.old_root
  AND runs.root_run_id IS DISTINCT FROM m.new_root
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
    old_roots = {rid: r["root_run_id"] for rid, r in rows.items()}
    for event in events:
        if event.kind != "run" or event.run_id is None:
            continue
        row = rows.get(event.run_id)
        if row is None:
            row = rows[event.run_id] = new_run(event)
        fold_run_event(row, event)
    if not rows:
        return
    explicit_roots = {rid: derive_from_facets(row) for rid, row in rows.items()}
    resolve_roots(cur, rows, explicit_roots)
    moved = [
        (rid, row["root_run_id"])
        for rid, row in rows.items()
        if row["root_run_id"] != rid and old_roots.get(rid, rid) != row["root_run_id"]
    ]
    if moved:
        with planner_without(cur, *INDEX_PROBES_ONLY):
            cur.execute(MOVE_ROOTS, ([m[0] for m in moved], [m[1] for m in moved]))
    write(cur, list(rows.values()))


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


def resolve_roots(
    cur: psycopg.Cursor[Any],
    rows: dict[uuid.UUID, dict[str, Any]],
    explicit: dict[uuid.UUID, uuid.UUID | None],
) -> None:
    """Sets root_run_id of every row: the parent facet's root, else the top of the chain."""
    outside = {
        r["parent_run_id"]
        for r in rows.values()
        if r["parent_run_id"] is not None and r["parent_run_id"] not in rows
    }
    stored: dict[uuid.UUID, uuid.UUID] = {}
    if outside:
        with loading_cursor(cur) as dcur:
            dcur.execute(SELECT_ROOTS, (uuid_array(outside),))
            stored = {row["id"]: row["root_run_id"] for row in dcur.fetchall()}
    resolved: dict[uuid.UUID, uuid.UUID] = {}

    def root_of(rid: uuid.UUID, visiting: set[uuid.UUID]) -> uuid.UUID:
        if rid in resolved:
            return resolved[rid]
        if rid not in rows:
            return stored.get(rid, rid)  # a parent we have not seen is its own root, for now
        row = rows[rid]
        parent = row["parent_run_id"]
        given = explicit.get(rid)
        if given is not None:
            root = given
        elif parent is None or parent in visiting:
            root = rid
        else:
            visiting.add(rid)
            root = root_of(parent, visiting)
        resolved[rid] = root
        return root

    for rid, row in rows.items():
        row["root_run_id"] = root_of(rid, set())


def write(cur: psycopg.Cursor[Any], rows: list[dict[str, Any]]) -> None:
    columns = [
        [json_text(r[c]) for r in rows] if c in JSON_COLUMNS else [r[c] for r in rows]
        for c in COLUMNS
    ]
    cur.execute(UPSERT, row_param(TYPES, columns))
