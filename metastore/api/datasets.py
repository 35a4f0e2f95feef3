"""GET /datasets, /datasets/{dataset_id} and /datasets/{dataset_id}/versions.

A dataset has a stable id and several names (the one events use, the identifiers of its
`symlinks` facet, the names a catalog rule joined); the exact lookup `namespace` + `name`
resolves any of them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import Access, access_of
from metastore.api import (
    asof,
    dataset_nodes,
    facets,
    lateness,
    limits,
    models,
    models_datasets,
    params,
    parts,
)
from metastore.api.db import connection, not_found, row, rows
from metastore.api.listing import Filter, Listing, Sort
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import (
    bound_kind,
    count_capped,
    decode_cursor,
    page,
    page_of_bytes,
)
from metastore.api.planner import SEQSCAN, Planner, turn_off, turn_on
from metastore.api.responses import json_response
from metastore.api.sqlparts import (
    dataset_type,
    description,
    latest_run,
    lifecycle_as_of,
    lifecycle_now,
    lifecycle_state,
    lifecycle_time,
    like_substring,
    name_count,
    owners,
    run_ref,
    tags,
)
from metastore.api.visibility import (
    RESTRICTED,
    both,
    dataset_visible,
    for_access,
    mark,
    name_visible,
    visible_display_name,
)

NAME_JSON = (
    "json_build_object('namespace', {n}.namespace, 'name', {n}.name, 'kind', {n}.kind, "
    "'symlink_type', {n}.symlink_type, 'joined_by', {n}.joined_by)"
)
SUMMARY = f"""d.id, d.namespace, d.name, d.first_seen, d.last_seen, {name_count("d")},
       {lifecycle_now("d.facets", "d.facet_times")}"""

# Without a namespace the list walks dataset_names in its primary key order, the row of
# each dataset's display name; with one, the names in that namespace in the same order,
# each dataset at its first name there (a dataset counts in every namespace it has a name
# in, as /namespaces counts it). Each walk orders by `key`, the walked name.
DISPLAY_WALK = """
FROM readmodel.dataset_names n
CROSS JOIN LATERAL (
    -- OFFSET 0 keeps this a per-name lookup: flattened into a join, the planner would
    -- misjudge the display-name test (three correlated equalities) and sort everything.
    SELECT * FROM readmodel.datasets d
    WHERE d.id = n.dataset_id AND d.merged_into IS NULL
      AND n.namespace = d.namespace AND n.name = d.name
    OFFSET 0
) d
WHERE true {filters}"""
# Unfiltered (no namespace, `q` or `name`) and unrestricted, the live datasets in their
# display name's order (datasets_display): each entry is a page's row, where the walk of
# every name read 1,661 names, 8,513 buffers and 8 ms for a page of 51 at 1,000,000 events
# (the names sorting first are other names of datasets shown under another: 0.4 ms now).
# `n` is the display name, as the walks' key and cursor name it.
LIVE_WALK = """
FROM readmodel.datasets d
CROSS JOIN LATERAL (SELECT d.namespace, d.name) n
WHERE d.merged_into IS NULL {filters}"""
NAMESPACE_WALK = """
FROM readmodel.dataset_names n
CROSS JOIN LATERAL (
    -- (a lookup per name, as above; and the first-name test a subplan per name, where a
    -- join would hash every name and dataset before the first page)
    SELECT * FROM readmodel.datasets d WHERE d.id = n.dataset_id OFFSET 0) d
WHERE n.namespace = %(namespace)s
  AND n.name = (SELECT min(f.name) FROM readmodel.dataset_names f
                WHERE f.dataset_id = n.dataset_id AND f.namespace = n.namespace)
  {filters}"""
DISPLAY_KEY = "n.namespace, n.name"
# A namespace's walk reads its names in the name index's order (local to the request's
# transaction, for its page and total): the planner guesses the first-name test keeps one
# name in 200, and past a cursor it then read every name after it by bitmap and sorted them
# (16,601 names, 650-1,070 ms at 1,000,000 events, the namespace depending on statistics).
ORDERED_WALK = Planner(("enable_bitmapscan", "enable_seqscan"))
# A namespace's datasets unfiltered, counted each once in the (namespace, dataset_id)
# index's order.
COUNT_IN_NAMESPACE = count_capped(
    "SELECT DISTINCT n.dataset_id FROM readmodel.dataset_names n WHERE n.namespace = %(namespace)s"
)
LIST_DATASETS = """
SELECT {summary}, {key}, ({matched})::text
{walk}
ORDER BY {key}
LIMIT %(limit)s
"""
# (every live dataset has one display name: unfiltered, the list counts the datasets)
COUNT_ALL = count_capped("SELECT 1 FROM readmodel.datasets d WHERE d.merged_into IS NULL")
FILTER_NAME = """AND n.dataset_id IN (
    SELECT q.dataset_id FROM readmodel.dataset_names q WHERE lower(q.name) LIKE %(pattern)s)"""
# `q` and `name` test the walked name's dataset (`n.dataset_id`, outside the walk's lateral
# lookup of its dataset), so the planner can start from the matching names where they are
# few: tested on the dataset, a page or count of a rare name walked every name (0.4-1.7 s
# at 1,000,000 events).
# `name` alone: datasets with a name exactly this, in any namespace (lower() for the index).
FILTER_EXACT_NAME = f"""AND n.dataset_id IN (
    SELECT x.dataset_id FROM readmodel.dataset_names x
    WHERE lower(x.name) = lower(%(name)s) AND x.name = %(name)s{mark("name", "x")})"""
MATCHED_IN_NAMESPACE = NAME_JSON.format(n="n")
MATCHED_BY = (
    """(SELECT {json} FROM readmodel.dataset_names m
    WHERE m.dataset_id = d.id AND {test}"""
    + mark("name", "m")
    + " ORDER BY m.namespace, m.name LIMIT 1)"
)
MATCHED_Q = MATCHED_BY.format(json=NAME_JSON.format(n="m"), test="lower(m.name) LIKE %(pattern)s")
MATCHED_NAME = MATCHED_BY.format(json=NAME_JSON.format(n="m"), test="m.name = %(name)s")

LOOKUP_DATASET = """
SELECT {summary}, n.namespace, n.name, {name}::text
FROM readmodel.dataset_names n
JOIN readmodel.datasets d ON d.id = n.dataset_id
WHERE n.namespace = %(namespace)s AND n.name = %(name)s{visible}
"""

# Restricted, a dataset is listed under its display name among its readable names (the
# display walk walks those), counted and matched by its readable names only: a hidden
# name neither shows nor matches (no oracle in `q` or `name`).
VISIBLE_DISPLAY_OF = visible_display_name("d.id")
SUMMARY_VISIBLE = f"""d.id, ({VISIBLE_DISPLAY_OF})[1], ({VISIBLE_DISPLAY_OF})[2], d.first_seen,
       d.last_seen, {name_count("d", name_visible(RESTRICTED, "c"))},
       {lifecycle_now("d.facets", "d.facet_times")}"""
# (a dataset whose display name is readable is walked at it, as unrestricted; only one
# whose display name is hidden looks up the best of its readable names)
DISPLAY_WALK_VISIBLE = f"""
FROM readmodel.dataset_names n
CROSS JOIN LATERAL (
    SELECT * FROM readmodel.datasets d
    WHERE d.id = n.dataset_id AND d.merged_into IS NULL
    OFFSET 0
) d
WHERE true{name_visible(RESTRICTED, "n")}
  AND CASE WHEN d.namespace = ANY(%(readable)s::text[])
           THEN n.namespace = d.namespace AND n.name = d.name
           ELSE ARRAY[n.namespace, n.name] = {visible_display_name("n.dataset_id")} END
  {{filters}}"""
FILTER_NAME_VISIBLE = f"""AND n.dataset_id IN (
    SELECT q.dataset_id FROM readmodel.dataset_names q
    WHERE lower(q.name) LIKE %(pattern)s{name_visible(RESTRICTED, "q")})"""
# The statements by Access.restricted: (summary columns, display walk, `q` filter, count of
# all, count in a namespace, namespace walk's filter, exact lookup).
LISTING = {
    False: (SUMMARY, DISPLAY_WALK, FILTER_NAME, COUNT_ALL, COUNT_IN_NAMESPACE, ""),
    True: (
        SUMMARY_VISIBLE,
        DISPLAY_WALK_VISIBLE,
        FILTER_NAME_VISIBLE,
        # (each visible dataset has one row in the walk: counted as datasets, a semi-join)
        count_capped(
            "SELECT 1 FROM readmodel.datasets d WHERE d.merged_into IS NULL"
            + dataset_visible(RESTRICTED, "d.id")
        ),
        count_capped(
            "SELECT DISTINCT n.dataset_id FROM readmodel.dataset_names n"
            " WHERE n.namespace = %(namespace)s" + name_visible(RESTRICTED, "n")
        ),
        name_visible(RESTRICTED, "n"),
    ),
}
LOOKUPS = {
    restricted: LOOKUP_DATASET.format(
        summary=LISTING[restricted][0],
        name=NAME_JSON.format(n="n"),
        visible=name_visible(RESTRICTED, "n") if restricted else "",
    )
    for restricted in (False, True)
}


def _select(query: Any, restricted: bool, filters: str, order: str) -> str:
    summary, display_walk = LISTING[restricted][:2]
    if query.namespace is not None:
        walk = NAMESPACE_WALK
    elif not restricted and not query.q and query.name is None:
        walk = LIVE_WALK
    else:
        walk = display_walk
    # The name that matched: of `q`, else of `name`, else its (first) name in `namespace`.
    matched = "NULL::json"
    if query.q:
        matched = for_access(MATCHED_Q, restricted)
    elif query.name is not None:
        matched = for_access(MATCHED_NAME, restricted)
    elif query.namespace is not None:
        matched = MATCHED_IN_NAMESPACE
    where = walk.format(filters=filters)
    return LIST_DATASETS.format(summary=summary, walk=where, key=order, matched=matched)


def _count(query: Any, restricted: bool, filters: str) -> str:
    if query.name is not None or query.q:
        walk = NAMESPACE_WALK if query.namespace is not None else LISTING[restricted][1]
        return count_capped("SELECT 1" + walk.format(filters=filters))
    return LISTING[restricted][4 if query.namespace is not None else 3]


# (both walks are keyed by the walked name: DISPLAY_KEY)
DATASETS = Listing(
    "datasets",
    _select,
    _count,
    {
        "": Sort(
            DISPLAY_KEY,
            f"AND ({DISPLAY_KEY}) > (%(a0)s, %(a1)s)",
            [str, str],
            lambda r: (r[7], r[8]),
        )
    },
    filters=(
        # (restricted, a namespace's walk keeps to its readable names)
        Filter("namespace", lambda query, restricted: LISTING[restricted][5], bind=None),
        Filter("name", FILTER_EXACT_NAME),
        Filter(
            "q", lambda query, restricted: LISTING[restricted][2], "pattern", like_substring, False
        ),
    ),
    extra_args=lambda query: {"namespace": query.namespace},
    settings=lambda query: ORDERED_WALK if _ordered(query) else None,
)


def _ordered(query: Any) -> bool:
    """Whether the page is a namespace's walk in the name index's order (ORDERED_WALK)."""
    return query.namespace is not None and not query.q and query.name is None


# The jobs that wrote any of its names: when last successfully (a run that COMPLETEd),
# and the lifecycle change they last reported; now from job_edges, as of T from the run
# edges that began by then; the jobs whose edge held then (now: as of asof.NOW, bound as
# `%(as_of)s`: the same jobs as of now), its last write and lifecycle change by any of
# its edges. The first
# EMBEDDED_REFS by name as JSON (`list`), each job with its latest run (now, or at T in
# its state then), joined LATERAL as `w` (the readers as `rd`), and how many there are
# (`total`, counted over the same groups: a count of its own checked each of the 20,000
# Trino queries' edges a second time, 0.4 s of the table's page).
JOB_WITH_RUN = """json_build_object('id', x.id, 'namespace', x.namespace, 'name', x.name,
                              'latest_run', {run})"""
WRITER = """json_build_object(
               'job', {job},
               'last_write_at', {last_write_at}, 'lifecycle_state', {lifecycle_state})"""
FIRST_BY_NAME = f"""LEFT JOIN LATERAL (
    SELECT coalesce(json_agg({{item}} ORDER BY x.namespace, x.name), '[]')::text AS list,
           coalesce(max(x.total), 0) AS total
    FROM ({{jobs}} ORDER BY 2, 3, 1 LIMIT {limits.EMBEDDED_REFS}) x
    {{run_joins}}
) {{alias}} ON true"""
JOBS_OF = (
    """
    SELECT {columns}, count(*) OVER () AS total
    FROM readmodel.dataset_names n
    JOIN readmodel.job_edges e ON e.namespace = n.namespace AND e.name = n.name
    JOIN readmodel.jobs j ON j.id = e.job_id
    WHERE n.dataset_id = d.id AND e.direction = '{direction}'"""
    + mark("job", "j")
    + """
    GROUP BY j.id, j.namespace, j.name
    HAVING bool_or({held})"""
)
HELD = asof.edge_held()
# (now: the fold's flag, no lookup of each job's latest run; the same jobs)
HELD_NOW = asof.edge_held(now=True)
JOB = "j.id, j.namespace, j.name, j.latest_run_id"
# Each job's latest run: now (`jr`), or at T (`lr` and `s`).
RUN_NOW = {
    "job": JOB_WITH_RUN.format(run=latest_run("jr")),
    "run_joins": "LEFT JOIN readmodel.runs jr ON jr.id = x.latest_run_id",
}
RUN_AS_OF = {
    "job": JOB_WITH_RUN.format(run=asof.RUN_AT_JSON),
    "run_joins": asof.latest_run_at_joins("x.id"),
}
WRITERS = FIRST_BY_NAME.format(
    item=WRITER.format(
        job=RUN_NOW["job"], last_write_at="x.last_write_at", lifecycle_state="x.lifecycle_state"
    ),
    jobs=JOBS_OF.format(
        columns=f"""{JOB}, max(e.last_write_at) AS last_write_at,
           (array_agg(e.lifecycle_state ORDER BY e.lifecycle_time DESC NULLS LAST))[1]
               AS lifecycle_state""",
        direction="output",
        held=HELD_NOW,
    ),
    run_joins=RUN_NOW["run_joins"],
    alias="w",
)
# The run edges of job `x` (as `re`) on any of the dataset's names in `direction`.
EDGES_OF_JOB = """FROM readmodel.dataset_names w
                   JOIN readmodel.run_edges re ON re.namespace = w.namespace
                    AND re.name = w.name AND re.direction = '{direction}'
                   WHERE w.dataset_id = d.id AND re.job_id = x.id"""


def last_by_as_of(last: str, first: str, direction: str) -> str:
    """The latest `re.<last>` of those edges by `%(as_of)s` (asof.NOW when now): an edge
    across that moment counts from its `re.<first>`."""
    return f"""(
                   SELECT max(CASE WHEN re.{last} <= %(as_of)s THEN re.{last}
                                   ELSE re.{first} END)
                   {EDGES_OF_JOB.format(direction=direction)}
                     AND re.{first} <= %(as_of)s)"""


WRITERS_AS_OF = FIRST_BY_NAME.format(
    item=WRITER.format(
        job=RUN_AS_OF["job"],
        last_write_at=last_by_as_of("last_write_at", "first_write_at", "output"),
        lifecycle_state=f"""(
                   SELECT re.lifecycle_state
                   {EDGES_OF_JOB.format(direction="output")}
                     AND re.lifecycle_time <= %(as_of)s
                   ORDER BY re.lifecycle_time DESC LIMIT 1)""",
    ),
    jobs=JOBS_OF.format(columns=JOB, direction="output", held=HELD),
    run_joins=RUN_AS_OF["run_joins"],
    alias="w",
)
# A reader: its job and when a run of it last read the dataset (any of its names) by
# `%(as_of)s` (asof.NOW when now): a run reading across that moment, from its first event.
READER = (
    "json_build_object('job', {job}, 'last_read_at', "
    + last_by_as_of("last_seen", "first_seen", "input")
    + ")"
)
READERS = FIRST_BY_NAME.format(
    item=READER.format(job=RUN_NOW["job"]),
    jobs=JOBS_OF.format(columns=JOB, direction="input", held=HELD_NOW),
    run_joins=RUN_NOW["run_joins"],
    alias="rd",
)
READERS_AS_OF = FIRST_BY_NAME.format(
    item=READER.format(job=RUN_AS_OF["job"]),
    jobs=JOBS_OF.format(columns=JOB, direction="input", held=HELD),
    run_joins=RUN_AS_OF["run_joins"],
    alias="rd",
)
# Its first EMBEDDED_REFS names (by kind, namespace, name); name_count counts them all.
# As of T (`seen`), the names first seen by then.
NAMES = f"""
coalesce((
    SELECT json_agg({NAME_JSON.format(n="n")} ORDER BY n.kind, n.namespace, n.name)
    FROM (SELECT * FROM readmodel.dataset_names n WHERE n.dataset_id = d.id{{seen}}
          ORDER BY n.kind, n.namespace, n.name LIMIT {limits.EMBEDDED_REFS}) n
), '[]')::text
"""
SEEN = " AND n.first_seen <= %(as_of)s"
# Restricted: the names in readable namespaces, shown and counted.
NAMES_SHOWN = mark("name", "n")
CATALOGUE = f"""{description("d.facets")}, {owners("d.facets")}, {tags("d.facets")},
       {dataset_type("d.facets")}"""

# The next write its writers' cadences lead to expect (judged now, also as of T).
NEXT_WRITE = lateness.of_dataset("d.id")

# An id absorbed by a merge answers as the dataset it was merged into. Its schema: the
# version last seen (by its versions' primary key; an index on last_event_time, which each
# observation moves, made every version update a non-HOT one: more than the copy it saved).
GET_DATASET = f"""
SELECT d.id, d.namespace, d.name, (
           SELECT v.fields::text FROM readmodel.dataset_versions v WHERE v.dataset_id = d.id
           ORDER BY v.last_event_time DESC, v.last_seq DESC LIMIT 1), d.facets::text,
       d.first_seen, d.last_seen, {NAMES.format(seen=NAMES_SHOWN)}, w.list, rd.list,
       {CATALOGUE}, {lifecycle_state("d.facets")}, {lifecycle_time("d.facet_times")},
       {name_count("d", mark("name", "c"))}, w.total, rd.total, {NEXT_WRITE}
FROM readmodel.datasets d
{WRITERS}
{READERS}
WHERE d.id = coalesce(
    (SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s){mark("dataset", "d.id")}
"""

# As of T: the schema of the latest observation by then, the jobs whose run at T (or
# static lineage by then) wrote or read it, and when it was last seen by then (its run
# edges and schema observations), the lifecycle change by then, its names first seen by
# then (and its display name among them). Facets and the catalogue fields are today's.
# (Its freshness, now or then: dataset_nodes.py.)
GET_DATASETS = both(GET_DATASET)
GET_DATASET_AS_OF = f"""
SELECT d.id, coalesce(dn.namespace, d.namespace), coalesce(dn.name, d.name), v.fields::text,
       d.facets::text, d.first_seen,
       coalesce((
           SELECT max(x.t) FROM readmodel.dataset_names n CROSS JOIN LATERAL (
               SELECT max(CASE WHEN e.last_seen <= %(as_of)s THEN e.last_seen
                               ELSE e.first_seen END) AS t
               FROM readmodel.run_edges e
               WHERE e.namespace = n.namespace AND e.name = n.name
                 AND e.first_seen <= %(as_of)s
             UNION ALL
               SELECT max(o.event_time) FROM readmodel.schema_observations o
               WHERE o.namespace = n.namespace AND o.name = n.name
                 AND o.event_time <= %(as_of)s
           ) x WHERE n.dataset_id = d.id), d.first_seen),
       {NAMES.format(seen=SEEN + NAMES_SHOWN)}, w.list, rd.list,
       {CATALOGUE}, lc.lifecycle_state, lc.lifecycle_time,
       {name_count("d", SEEN.replace("n.", "c.") + mark("name", "c"))}, w.total, rd.total,
       {NEXT_WRITE}
FROM readmodel.datasets d
LEFT JOIN readmodel.dataset_versions v
  ON v.dataset_id = d.id AND v.fields_hash = {asof.schema_at("d.id")}
LEFT JOIN LATERAL {lifecycle_as_of("d")} lc ON true
LEFT JOIN LATERAL {asof.display_name_at("d.id")} dn ON true
{WRITERS_AS_OF}
{READERS_AS_OF}
WHERE d.id = coalesce(
    (SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s){mark("dataset", "d.id")}
"""

GET_DATASETS_AS_OF = both(GET_DATASET_AS_OF)
# Restricted: the display name among the readable names (then: if readable, else now's).
VISIBLE_DISPLAY = f"SELECT {visible_display_name('%(id)s::uuid')}"

# The dataset's names under which runs read or wrote it, and under which schemas were
# observed: one index probe each (ordered as the index is, so it stays one whatever the
# planner guesses of a name's rows), so the page below looks up only those. A dataset
# with 2,001 names (a symlinks facet) otherwise cost a scan of run_edges, and 2,001
# schema lookups for each reader on the page.
RUN_NAMES = """
SELECT n.namespace, n.name, e.found IS NOT NULL, o.found IS NOT NULL
FROM readmodel.dataset_names n
LEFT JOIN LATERAL (
    SELECT true AS found FROM readmodel.run_edges e
    WHERE e.namespace = n.namespace AND e.name = n.name
    ORDER BY e.namespace, e.name, e.direction LIMIT 1) e ON true
LEFT JOIN LATERAL (
    SELECT true AS found FROM readmodel.schema_observations o
    WHERE o.namespace = n.namespace AND o.name = n.name
    ORDER BY o.namespace, o.name, o.event_time DESC LIMIT 1) o ON true
WHERE n.dataset_id = %(id)s
"""
EDGE_NAMES = "unnest(%(edge_namespaces)s::text[], %(edge_names)s::text[])"
SCHEMA_NAMES = (
    "(SELECT * FROM unnest(%(schema_namespaces)s::text[], %(schema_names)s::text[])"
    " AS s(namespace, name))"
)

# The runs that read or wrote any of those names (started by `as_of` when given, of one
# role when `direction` is given), newest first by start (writers first with sort
# `outputs_first`); the page is cut before the per-run schema lookups. A run's schema: the
# latest its own events carried for the dataset in that role, else (a reader) the latest
# observed at its start. Its state: now, or at `as_of` from its events then.
# Formatted with `state`, `ended` and `state_join` (now or at T), `key` and `outer_key`
# (the sort's key over `t`/`lr` and over `p`), `after` (the cursor's condition, or none),
# `edge_names` and `schema_names` (the FROM items above) and `schema_at`.
RUNS_OF_DATASET = (
    """
WITH page AS (
    SELECT t.run_id, t.direction, t.lifecycle_state, lr.started_at
    FROM (SELECT e.run_id, e.direction,
                 (array_agg(e.lifecycle_state ORDER BY e.lifecycle_time DESC NULLS LAST))[1]
                     AS lifecycle_state
          FROM {edge_names} AS n(namespace, name)
          JOIN readmodel.run_edges e ON e.namespace = n.namespace AND e.name = n.name
          WHERE (%(direction)s::text IS NULL OR e.direction = %(direction)s::text)"""
    + mark("job_id", "e.job_id")
    + """
          GROUP BY e.run_id, e.direction) t
    JOIN readmodel.lineage_runs lr ON lr.run_id = t.run_id
    WHERE (%(as_of)s::timestamptz IS NULL OR lr.started_at <= %(as_of)s) {after}
    ORDER BY {key}
    LIMIT %(limit)s
),
versions AS (
    SELECT fields_hash, row_number() OVER (ORDER BY event_time, seq) AS version
    FROM readmodel.dataset_versions WHERE dataset_id = %(id)s
)
SELECT p.run_id, p.direction, p.started_at, r.job_id, r.job_namespace, r.job_name,
       {state}, {ended},
       (SELECT v.version FROM versions v WHERE v.fields_hash = coalesce(
            (SELECT o.fields_hash FROM readmodel.schema_observations o
             JOIN {schema_names} n ON n.namespace = o.namespace AND n.name = o.name
             WHERE o.run_id = p.run_id AND o.role = p.direction
               AND (%(as_of)s::timestamptz IS NULL OR o.event_time <= %(as_of)s)
             ORDER BY o.event_time DESC, o.seq DESC LIMIT 1),
            CASE WHEN p.direction = 'input' THEN {schema_at} END)),
       p.lifecycle_state
FROM page p
JOIN readmodel.runs r ON r.id = p.run_id
JOIN readmodel.lineage_runs lr ON lr.run_id = p.run_id {state_join}
ORDER BY {outer_key}
"""
)
RUN_STATE_NOW = {"state": "r.state", "ended": "r.ended_at", "state_join": ""}
# As of T the page's runs' states come after it (asof.run_states_at: read here, they made
# this statement, planned for each request, plan every monthly partition of the log).
RUN_STATE_AS_OF = {"state": "NULL::text", "ended": "NULL::timestamptz", "state_join": ""}
# The sorts: the key's columns (all descending: 'output' > 'input') and their types.
RUN_SORTS: dict[str, tuple[tuple[str, str, str], list[type]]] = {
    "started": (("started_at", "run_id", "direction"), [dt.datetime, uuid.UUID, str]),
    "outputs_first": (("direction", "started_at", "run_id"), [str, dt.datetime, uuid.UUID]),
}
_RUN_KEY = {"started_at": "lr.started_at", "run_id": "t.run_id", "direction": "t.direction"}
_RUN_CAST = {"started_at": "timestamptz", "run_id": "uuid", "direction": "text"}


def runs_of_dataset(as_of: bool, sort: str, after: bool, restricted: bool = False) -> str:
    columns, _ = RUN_SORTS[sort]
    key = ", ".join(_RUN_KEY[c] for c in columns)
    bound = ", ".join(f"%(a{i})s::{_RUN_CAST[c]}" for i, c in enumerate(columns))
    return for_access(RUNS_OF_DATASET, restricted).format(
        **(RUN_STATE_AS_OF if as_of else RUN_STATE_NOW),
        edge_names=EDGE_NAMES,
        schema_names=SCHEMA_NAMES,
        schema_at=asof.schema_at_names(SCHEMA_NAMES, "p.started_at"),
        key=", ".join(f"{_RUN_KEY[c]} DESC" for c in columns),
        outer_key=", ".join(f"p.{c} DESC" for c in columns),
        after=f"AND ({key}) < ({bound})" if after else "",
    )


DATASET_EXISTS = "SELECT 1 FROM readmodel.datasets WHERE id = %(id)s"
# The id a dataset id answers as (an id absorbed by a merge: the survivor's).
DATASET_ID = """
SELECT d.id, d.first_seen FROM readmodel.datasets d
WHERE d.id = coalesce((SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s)
"""

# Newest first. Version numbers count from the oldest schema, so they are computed over
# the whole history and the page is cut after. As of T: the versions first seen by then.
LIST_VERSIONS = f"""
SELECT version, event_time, seq,
       -- past the page's bytes (the first always fits): no fields, the page ends before
       CASE WHEN sum(octet_length(fields)) OVER w - octet_length(fields) < %(page_bytes)s
            THEN fields END,
       run
FROM (
    SELECT v.version, v.event_time, v.seq, v.fields::text AS fields,
           -- no run carried it (a DatasetEvent, an input): null; a run never seen: its id
           coalesce((CASE WHEN v.run_id IS NULL THEN NULL
                          WHEN r.id IS NULL THEN json_build_object('id', v.run_id, 'job', NULL,
                                                                   'state', NULL)
                          ELSE {run_ref("r")} END)::text, 'null') AS run
    FROM (
        SELECT row_number() OVER (ORDER BY event_time, seq) AS version,
               event_time, seq, fields, run_id
        FROM readmodel.dataset_versions WHERE dataset_id = %(id)s
    ) v
    LEFT JOIN readmodel.runs r ON r.id = v.run_id{mark("run", "r")}
    WHERE (%(after_time)s::timestamptz IS NULL
           OR (v.event_time, v.seq) < (%(after_time)s, %(after_seq)s))
      AND (%(as_of)s::timestamptz IS NULL OR v.event_time <= %(as_of)s)
    ORDER BY v.event_time DESC, v.seq DESC
    LIMIT %(limit)s
) p
WINDOW w AS (ORDER BY event_time DESC, seq DESC)
ORDER BY event_time DESC, seq DESC
"""
# The distinct schemas readers reported under any of its names (reader_schemas), latest
# first, each with the version it is (its engine-neutral hash is a version's) and the
# latest run that reported it. As of T: those first reported by then.
READER_SCHEMAS = f"""
SELECT s.fields::text, s.first_seen, s.last_seen, (
           SELECT count(*) FROM readmodel.dataset_versions o
           WHERE o.dataset_id = v.dataset_id AND (o.event_time, o.seq) <= (v.event_time, v.seq)),
       CASE WHEN r.id IS NOT NULL THEN {run_ref("r")}::text
            WHEN s.run_id IS NOT NULL
            THEN json_build_object('id', s.run_id, 'job', NULL, 'state', NULL)::text END
FROM (
    SELECT DISTINCT ON (s.fields_hash) s.*
    FROM readmodel.dataset_names n
    JOIN readmodel.reader_schemas s ON s.namespace = n.namespace AND s.name = n.name
    WHERE n.dataset_id = %(id)s{mark("name", "n")}
      AND (%(as_of)s::timestamptz IS NULL OR s.first_seen <= %(as_of)s)
    ORDER BY s.fields_hash, s.last_seen DESC, s.last_seq DESC
) s
LEFT JOIN readmodel.dataset_versions v
  ON v.dataset_id = %(id)s AND v.fields_hash = s.fields_hash
 AND (%(as_of)s::timestamptz IS NULL OR v.event_time <= %(as_of)s)
LEFT JOIN readmodel.runs r ON r.id = s.run_id{mark("run", "r")}
ORDER BY s.last_seen DESC, s.last_seq DESC, s.fields_hash
LIMIT {limits.EMBEDDED_PAGE}
"""
LISTS_VERSIONS = both(LIST_VERSIONS)
READERS_SCHEMAS = both(READER_SCHEMAS)
# How many versions and runs the dataset page embeds (the first page of each list).
EMBEDDED = limits.EMBEDDED_PAGE


class ListQuery(params.Paged, frozen=True):
    namespace: params.NamespaceName = None
    name: params.ExactName = None
    q: params.Substring = None


class DatasetPath(msgspec.Struct, frozen=True):
    dataset_id: uuid.UUID


class PageQuery(params.Paged, frozen=True):
    as_of: asof.AsOf = None


class RunsQuery(params.Paged, frozen=True):
    as_of: asof.AsOf = None
    role: Annotated[
        Literal["input", "output"] | None,
        Meta(
            description="Only the runs of this `role`: that read it (`input`) or wrote it "
            "(`output`)."
        ),
    ] = None
    sort: Annotated[
        Literal["started", "outputs_first"],
        Meta(
            description="`started`: newest first by `started_at`; `outputs_first`: the runs "
            "that wrote it (role `output`) first, newest first, then those that read it "
            "(the order of the dataset page's embedded `runs`)."
        ),
    ] = "started"


DatasetQuery = asof.AsOfQuery


LIST = Operation(
    "GET",
    "/datasets",
    "listDatasets",
    "List or look up datasets",
    models_datasets.DatasetPage,
    tag="datasets",
    query=ListQuery,
    description="Datasets by their display name (its most table-like name). `namespace` "
    "lists the datasets with any name in that namespace (emitted, symlink or catalog: a "
    "dataset counts in each namespace it has a name in, as /namespaces and "
    "/search?namespace= count it), once each, ordered by their first name there, which "
    "`matched_name` gives (its `namespace` is the one asked for; the item's own "
    "`namespace` is its display name's); `q` is a "
    "substring of any of its names; `name` alone matches any of its names exactly, in any "
    "namespace. `namespace` and `name` together are the exact lookup: it resolves any name "
    "of a dataset, symlink and catalog names included, and answers one item or none. Each "
    "item says in `matched_name` which of its names matched, and in `freshness` its last "
    "successful write and whether it is stale, as the dataset page does (read for the "
    "whole page at once).",
)
GET = Operation(
    "GET",
    "/datasets/{dataset_id}",
    "getDataset",
    "A dataset",
    models_datasets.Dataset,
    tag="datasets",
    path_params=DatasetPath,
    query=DatasetQuery,
    not_found=True,
    description="The dataset page in one answer: all its names with their kind, its "
    "current schema, description, owners, tags, type, lifecycle state, facets, its "
    "freshness (last successful write, a failed attempt after it, stale and why), the "
    "jobs that write it (with their last successful write and lifecycle change) and read "
    "it, each with its latest run, and the first page of its schema history (`versions`) "
    "and of its runs (`runs`, writers first). With `as_of`: its schema as of then (the "
    "latest version seen at or before it), the jobs whose latest run started by then "
    "wrote or read it, `last_seen`, the lifecycle change, freshness and history as of "
    "then, the names first seen by then (its display name among them); facets and the "
    "catalogue fields as they are now. A dataset first seen after `as_of` answers 404 of "
    "type `not-yet`. " + models.WRITE_RULE,
)
VERSIONS = Operation(
    "GET",
    "/datasets/{dataset_id}/versions",
    "listDatasetVersions",
    "The schema history of a dataset",
    models_datasets.DatasetVersionPage,
    tag="datasets",
    path_params=DatasetPath,
    query=PageQuery,
    not_found=True,
    description="One version per distinct schema, newest first, each with the run whose "
    "output first carried it (a schema only a failed or aborted run reported is no "
    "version; a page ends once it holds 4 MiB of fields, always holding one). With "
    "`as_of`: the versions first seen by then.",
)
RUNS = Operation(
    "GET",
    "/datasets/{dataset_id}/runs",
    "listDatasetRuns",
    "The runs that read or wrote a dataset",
    models_datasets.RunOfDatasetPage,
    tag="datasets",
    path_params=DatasetPath,
    query=RunsQuery,
    not_found=True,
    description="Every run that read (`role` input) or wrote (output) the dataset under "
    "any of its names, newest first by start (or as `sort` says), with the version of the "
    "schema it saw or produced (as numbered by /versions) and the lifecycle change it "
    "reported (a DROP wrote no data). A run that did both appears once per role. "
    "`role=input` or `role=output` keeps one role. With `as_of`: the runs started by "
    "then, in the state they had then.",
)
resource = Resource()

_name = msgspec.json.Decoder(models_datasets.DatasetName)
_names = msgspec.json.Decoder(list[models_datasets.DatasetName])
_writers = msgspec.json.Decoder(list[models_datasets.DatasetWriter])
_readers = msgspec.json.Decoder(list[models_datasets.DatasetReader])
_owners = msgspec.json.Decoder(list[models.Owner])
_tags = msgspec.json.Decoder(list[models.Tag])
_run_ref = msgspec.json.Decoder(models.RunRef | None)
_lifecycle = msgspec.json.Decoder(models.Lifecycle)


def _run_shown(run: models.RunRef, access: Access) -> models.RunRef:
    if run.job is None or access.reads(run.job.namespace):
        return run
    return msgspec.structs.replace(run, job=None)


def _freshness_shown(fresh: models.DatasetFreshness, access: Access) -> models.DatasetFreshness:
    """Restricted: a run of a hidden job in a dataset's freshness keeps its id and state
    but not its job, and a stale reason's dataset named in a hidden namespace is left out
    (whether the data is current stays true; whose run or which input it was is not
    told)."""
    if not access.restricted:
        return fresh
    last, failed = fresh.last_write, fresh.failed_attempt
    return msgspec.structs.replace(
        fresh,
        last_write=last and msgspec.structs.replace(last, run=_run_shown(last.run, access)),
        failed_attempt=failed
        and msgspec.structs.replace(failed, run=_run_shown(failed.run, access)),
        stale_reasons=[
            msgspec.structs.replace(
                s,
                run=s.run and _run_shown(s.run, access),
                dataset=s.dataset if s.dataset and access.reads(s.dataset.namespace) else None,
            )
            for s in fresh.stale_reasons
        ],
    )


async def _summaries(
    conn: AsyncConnection[Any], access: Access, found: list[Any]
) -> list[models_datasets.DatasetSummary]:
    """The list items of a page's rows, each with its freshness: one statement for the
    page (dataset_nodes.py), not one per row."""
    fresh = await dataset_nodes.freshness_of(conn, [r[0] for r in found], None)
    return [
        models_datasets.DatasetSummary(
            id=r[0],
            namespace=r[1],
            name=r[2],
            first_seen=r[3],
            last_seen=r[4],
            name_count=r[5],
            lifecycle=_lifecycle.decode(r[6]) if r[6] is not None else None,
            matched_name=_name.decode(r[9]) if r[9] is not None else None,
            freshness=_freshness_shown(fresh[r[0]], access),
        )
        for r in found
    ]


@resource.add(LIST)
async def list_datasets(request: Request) -> Response:
    query: ListQuery = LIST.parse_query(request)
    access = await access_of(request)
    restricted = access.restricted
    if query.name is not None and query.namespace is not None:
        async with connection(request) as conn:
            found = await rows(
                conn,
                LOOKUPS[restricted],
                {"namespace": query.namespace, "name": query.name, **access.sql_params()},
            )
            items = await _summaries(conn, access, found)
        return json_response(
            request,
            models_datasets.DatasetPage(
                items=items,
                next_cursor=None,
                total=len(found),
                total_is_exact=True,
            ),
        )
    planned = DATASETS.plan(query, access)
    async with connection(request) as conn:
        listed = await planned.read(conn)
        summaries = await _summaries(conn, access, listed.rows)
    return json_response(
        request,
        models_datasets.DatasetPage(
            items=summaries,
            **listed.page(),
        ),
    )


async def _versions(
    conn: AsyncConnection[Any],
    access: Access,
    dataset: uuid.UUID,
    query: PageQuery,
    kind: str,
    page_bytes: int = limits.PAGE_BYTES,
) -> models_datasets.DatasetVersionPage:
    """A page of versions: `query.limit` at most, ending early once it holds `page_bytes`
    of fields (always its first)."""
    after: tuple[Any, ...] = (None, None)
    if query.cursor is not None:
        after = decode_cursor(query.cursor, kind, [dt.datetime, int])
    args = {
        "id": dataset,
        "after_time": after[0],
        "after_seq": after[1],
        "as_of": query.as_of,
        "limit": query.limit + 1,
        "page_bytes": page_bytes,
        **access.sql_params(),
    }
    found = await rows(conn, LISTS_VERSIONS[access.restricted], args)
    items, next_cursor = page_of_bytes(found, query.limit, kind, lambda r: (r[1], r[2]), 3)
    return models_datasets.DatasetVersionPage(
        items=[
            models_datasets.DatasetVersion(
                version=r[0], event_time=r[1], fields=parts.fields(r[3]), run=_run_ref.decode(r[4])
            )
            for r in items
        ],
        next_cursor=next_cursor,
    )


async def _runs(
    conn: AsyncConnection[Any], access: Access, dataset: uuid.UUID, query: RunsQuery, kind: str
) -> models_datasets.RunOfDatasetPage:
    columns, types = RUN_SORTS[query.sort]
    # Index probes whatever the tables' sizes (a small schema_observations, now that
    # readers' schemas are not in it, was scanned whole once per name and per run): no seq
    # scans for the names and the page.
    await turn_off(conn, SEQSCAN)
    names = await rows(conn, RUN_NAMES, {"id": dataset})
    args: dict[str, Any] = {
        "id": dataset,
        "direction": query.role,
        "edge_namespaces": [n[0] for n in names if n[2]],
        "edge_names": [n[1] for n in names if n[2]],
        "schema_namespaces": [n[0] for n in names if n[3]],
        "schema_names": [n[1] for n in names if n[3]],
        "as_of": query.as_of,
        "limit": query.limit + 1,
        **access.sql_params(),
    }
    if query.cursor is not None:
        args.update((f"a{i}", v) for i, v in enumerate(decode_cursor(query.cursor, kind, types)))
    sql = runs_of_dataset(
        query.as_of is not None, query.sort, query.cursor is not None, access.restricted
    )
    found = await rows(conn, sql, args)
    await turn_on(conn, SEQSCAN)
    at = {"run_id": 0, "direction": 1, "started_at": 2}
    items, next_cursor = page(found, query.limit, kind, lambda r: [r[at[c]] for c in columns])
    if query.as_of is not None:  # (each run's state and end at T: RUN_STATE_AS_OF)
        states = await asof.run_states_at(conn, {r[0] for r in items}, query.as_of)
        items = [(*r[:6], *states.get(r[0], ("RUNNING", None)), *r[8:]) for r in items]
    return models_datasets.RunOfDatasetPage(
        items=[
            models_datasets.RunOfDataset(
                id=r[0],
                job=models.JobRef(id=r[3], namespace=r[4], name=r[5]),
                role=r[1],
                state=r[6],
                started_at=r[2],
                ended_at=r[7],
                duration_seconds=(r[7] - r[2]).total_seconds() if r[7] is not None else None,
                schema_version=r[8],
                lifecycle_state=r[9],
            )
            for r in items
        ],
        next_cursor=next_cursor,
    )


def _versions_kind(dataset: uuid.UUID, query: PageQuery) -> str:
    return bound_kind("versions", query, dataset)


def _runs_kind(dataset: uuid.UUID, query: RunsQuery) -> str:
    return bound_kind("dataset-runs", query, dataset)


@resource.add(GET)
async def get_dataset(request: Request) -> Response:
    path: DatasetPath = GET.parse_path(request)
    query: DatasetQuery = GET.parse_query(request)
    access = await access_of(request)
    args = {"id": path.dataset_id, "as_of": query.as_of or asof.NOW, **access.sql_params()}
    first = PageQuery(as_of=query.as_of, limit=EMBEDDED)
    outputs_first = RunsQuery(as_of=query.as_of, sort="outputs_first", limit=EMBEDDED)
    async with connection(request) as conn:
        statements = GET_DATASETS if query.as_of is None else GET_DATASETS_AS_OF
        sql = statements[access.restricted]
        r = await row(conn, sql, args)
        if r is None:
            raise not_found("dataset", path.dataset_id)
        asof.check_seen("dataset", path.dataset_id, r[5], query.as_of)
        versions = await _versions(
            conn, access, r[0], first, _versions_kind(r[0], first), limits.EMBEDDED_BYTES
        )
        runs = await _runs(conn, access, r[0], outputs_first, _runs_kind(r[0], outputs_first))
        readers = await rows(
            conn,
            READERS_SCHEMAS[access.restricted],
            {"id": r[0], "as_of": query.as_of, **access.sql_params()},
        )
        display = (r[1], r[2])
        if not access.reads(r[1]):
            (display,) = await row(conn, VISIBLE_DISPLAY, {"id": r[0], **access.sql_params()})
        fresh = (await dataset_nodes.freshness_of(conn, [r[0]], query.as_of))[r[0]]
    fresh = _freshness_shown(fresh, access)
    names = _names.decode(r[7])
    # (its sensitive facets: where one of its names it shows is in a namespace that shows them)
    sensitive = any(access.shows_sensitive(n.namespace) for n in names)
    lifecycle = None
    if r[14] is not None and r[15] is not None:
        lifecycle = models.Lifecycle(state=r[14], changed_at=r[15])
    return json_response(
        request,
        models_datasets.Dataset(
            id=r[0],
            namespace=display[0],
            name=display[1],
            fields=parts.fields(r[3]) if r[3] is not None else None,
            reader_schemas=[
                models_datasets.ReaderSchema(
                    fields=parts.fields(s[0]),
                    first_seen=s[1],
                    last_seen=s[2],
                    version=s[3] or None,
                    run=_run_ref.decode(s[4]) if s[4] is not None else None,
                )
                for s in readers
            ],
            facets=facets.served(r[4], facets.DATASET, sensitive=sensitive),
            first_seen=r[5],
            last_seen=r[6],
            names=names,
            name_count=r[16],
            producers=_writers.decode(r[8]),
            producer_count=r[17],
            consumers=_readers.decode(r[9]),
            consumer_count=r[18],
            description=r[10],
            owners=_owners.decode(r[11]),
            tags=_tags.decode(r[12]),
            dataset_type=r[13],
            lifecycle=lifecycle,
            last_write_at=fresh.last_write.at if fresh.last_write else None,
            freshness=fresh,
            next_write=lateness.decode_expected_write(r[19]),
            versions=versions,
            runs=runs,
        ),
    )


async def _dataset_id(
    conn: AsyncConnection[Any], access: Access, dataset: uuid.UUID, query: PageQuery | RunsQuery
) -> Any:
    ref = await row(
        conn, DATASET_ID + dataset_visible(access, "d.id"), {"id": dataset, **access.sql_params()}
    )
    if ref is None:
        raise not_found("dataset", dataset)
    asof.check_seen("dataset", dataset, ref[1], query.as_of)
    return ref[0]


async def _of_dataset(request: Request, op: Operation, read: Any, kind: Any) -> Response:
    """A list of a dataset (`read`: _versions, _runs; `kind`: its cursor's), 404 when the
    dataset is unknown or hidden."""
    path: DatasetPath = op.parse_path(request)
    query = op.parse_query(request)
    access = await access_of(request)
    async with connection(request) as conn:
        dataset = await _dataset_id(conn, access, path.dataset_id, query)
        answer = await read(conn, access, dataset, query, kind(dataset, query))
    return json_response(request, answer)


@resource.add(VERSIONS)
async def list_versions(request: Request) -> Response:
    return await _of_dataset(request, VERSIONS, _versions, _versions_kind)


@resource.add(RUNS)
async def list_runs(request: Request) -> Response:
    return await _of_dataset(request, RUNS, _runs, _runs_kind)
