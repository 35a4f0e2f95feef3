"""GET /datasets/{dataset_id}/column-lineage: the field edges around a dataset, now or as of T.

The walk goes breadth first in Python, one statement per level and direction (as
/lineage/runs does), over nodes (dataset id, field): each field is expanded once however
many paths reach it, and the walk stops at the depth asked for, at limits.EDGE_LIMIT
edges kept or limits.VISIT_LIMIT edges looked at, answering `truncated`. Each statement
looks edges up by name, and only under the names of a dataset that have edges at all (a
dataset with 2,001 names once cost 2,001 scans per field). Now and as of T alike (asof.NOW
for now), it reads the reports that count (COUNTED: each job's latest run's by then, or
with view=cumulative every run's of the window, from readmodel.column_lineage_runs), each
report's pairs expanded once, and only then spends its limits (issue 48: as of T it spent
them on every pair ever reported first).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import EVERYTHING, Access, access_of
from metastore.api import asof, limits, models, models_lineage, params, parts, visibility
from metastore.api.datasets import DatasetPath
from metastore.api.db import connection, not_found, rows
from metastore.api.lineage import HIDDEN_NODES
from metastore.api.operation import Operation, Resource
from metastore.api.planner import SEQSCAN, Planner, pipelined
from metastore.api.responses import json_response

# The names of the frontier's datasets under which column_lineage has edges on the `near`
# side: upstream, names with reports (column_lineage); downstream, the reports' input
# names (column_inputs). A row per report and name, not per field pair: a semi-join,
# which the planner makes a scan of while they are small and index probes after.
NAMES_WITH_EDGES = """
SELECT n.dataset_id, n.namespace, n.name
FROM readmodel.dataset_names n
WHERE n.dataset_id = ANY(%(ids)s::uuid[]) AND EXISTS (
    SELECT 1 FROM readmodel.{table} c
    WHERE c.{near}_namespace = n.namespace AND c.{near}_name = n.name)
"""
# A report's pairs, by an index probe whatever the planner guesses of the reports asked.
PAIRS_OF = "(SELECT cr.pairs FROM readmodel.column_reports cr WHERE cr.report = {report})"
# Whether column_lineage_runs row `r` counts at `%(as_of)s` (asof.NOW: now): it is the
# report of its job's latest run started by then, or the job's static lineage (the nil
# run) declared by then. The rule of the dataset graph (asof.job_edges_at).
COUNTED = f"""CASE WHEN r.run_id = '{asof.STATIC_RUN}' THEN r.first_seen <= %(as_of)s
               ELSE r.run_id = {asof.latest_run("r.job_id")} END"""
# view=cumulative: the report of any run started from `%(since)s` to `%(as_of)s`.
COUNTED_IN_WINDOW = f"""CASE WHEN r.run_id = '{asof.STATIC_RUN}' THEN r.first_seen <= %(as_of)s
               ELSE EXISTS (SELECT 1 FROM readmodel.lineage_runs lr
                            WHERE lr.run_id = r.run_id AND lr.started_at <= %(as_of)s
                              AND lr.started_at >= %(since)s) END"""
# The reports of a level: those that count (COUNTED) under the names bound as arrays (so
# the planner knows how many lookups there are: a dataset's names once came from a
# subquery it guessed at 2,001 rows, and it scanned the table), each once per name with the
# jobs that sent it. A row per name and report: the name's ordinal and the name, the
# report's output name, the job and run of its latest event and its time, the first
# EDGE_JOBS jobs that sent it and how many did, when it was first sent, the report, and its
# pairs as stored, unless the walk has them (`%(known)s`) or an earlier row of the level
# carries them: a walk reads each report's pairs once, and expands and filters them itself
# (the server parsed each pair's JSON once per member it read: 3,000 pairs cost 40 ms).
LEVEL = f"""
WITH candidates AS MATERIALIZED (
    SELECT k.i, k.namespace AS k_namespace, k.name AS k_name, r.out_namespace, r.out_name,
           r.report, r.first_seen, r.job_id, r.run_id, r.last_seen, r.last_seq
    FROM unnest(%(namespaces)s::text[], %(names)s::text[]) WITH ORDINALITY AS k(namespace, name, i)
    {{reports}}
),
counted_runs AS MATERIALIZED ({{runs}}),
counted AS MATERIALIZED (
    SELECT r.i, r.k_namespace, r.k_name, r.out_namespace, r.out_name,
           r.report, min(r.first_seen) AS first_seen,
           (array_agg(r.job_id ORDER BY r.first_seen, r.job_id))[1:{limits.EDGE_JOBS}] AS jobs,
           count(DISTINCT r.job_id) AS job_count,
           (array_agg(ARRAY[r.job_id, r.run_id] ORDER BY r.last_seen DESC, r.last_seq DESC))[1:1]
               AS latest,
           max(r.last_seen) AS last_seen,
           (array_agg(r.last_seq ORDER BY r.last_seen DESC, r.last_seq DESC))[1] AS last_seq
    FROM candidates r LEFT JOIN counted_runs lj ON lj.job_id = r.job_id
    WHERE {{counted}}
    GROUP BY r.i, r.k_namespace, r.k_name, r.out_namespace, r.out_name, r.report
    LIMIT %(cap)s
)
SELECT c.i, c.k_namespace, c.k_name, c.out_namespace, c.out_name,
       c.latest[1][1], c.latest[1][2], c.jobs, c.job_count,
       c.last_seen, c.last_seq, c.first_seen, c.report,
       CASE WHEN c.report = ANY(%(known)s::bytea[])
                 OR row_number() OVER (PARTITION BY c.report ORDER BY c.i) > 1 THEN NULL
            ELSE {PAIRS_OF.format(report="c.report")}::text END
FROM counted c
"""
UP_REPORTS = """JOIN readmodel.column_lineage_runs r
      ON r.out_namespace = k.namespace AND r.out_name = k.name"""
# (the runs of a report under an output: the output's runs, by its primary key)
DOWN_REPORTS = """JOIN readmodel.column_inputs ci
      ON ci.in_namespace = k.namespace AND ci.in_name = k.name
    JOIN readmodel.column_lineage o ON o.report = ci.report
    JOIN readmodel.column_lineage_runs r
      ON r.out_namespace = o.out_namespace AND r.out_name = o.out_name AND r.report = o.report"""
# How many jobs sent any of the reports of each pair, counting at `%(as_of)s` (when a
# pair is in several reports and one of them has more jobs than the level read).
JOB_COUNTS = """
SELECT k.i, count(DISTINCT r.job_id)
FROM unnest(%(pairs)s::bigint[], %(namespaces)s::text[], %(names)s::text[],
            %(reports)s::bytea[]) AS k(i, namespace, name, report)
JOIN readmodel.column_lineage_runs r
  ON r.out_namespace = k.namespace AND r.out_name = k.name AND r.report = k.report
WHERE {counted}
GROUP BY k.i
"""
# The datasets of the names at the far ends of a level's edges (a wide table's 3,000 edges
# name one), once each (`false`), and in the same round trip the names with edges (as
# NAMES_WITH_EDGES) of those datasets the walk has not looked up yet (`true`), which the
# next level needs: a round trip per level less (each costs a wake-up of both processes).
DATASETS_OF = """
WITH far AS MATERIALIZED (
    SELECT n.namespace, n.name, n.dataset_id
    FROM unnest(%(namespaces)s::text[], %(names)s::text[]) AS k(namespace, name)
    JOIN readmodel.dataset_names n ON n.namespace = k.namespace AND n.name = k.name
)
SELECT f.namespace, f.name, f.dataset_id, false FROM far f
UNION ALL
SELECT n.namespace, n.name, n.dataset_id, true
FROM readmodel.dataset_names n
WHERE n.dataset_id IN (SELECT f.dataset_id FROM far f
                       WHERE f.dataset_id <> ALL(%(looked_up)s::uuid[])) AND EXISTS (
    SELECT 1 FROM readmodel.{table} c
    WHERE c.{near}_namespace = n.namespace AND c.{near}_name = n.name)
"""


def _counted(rule: str) -> str:
    """COUNTED by rule (asof.window)."""
    if rule == "recent":  # (the latest run, if it started in the window)
        return COUNTED.replace(asof.latest_run("r.job_id"), asof.latest_run("r.job_id", True))
    return COUNTED_IN_WINDOW if rule == "cumulative" else COUNTED


# A level's rows count by their job's run found once per job (`counted_runs` as `lj`), not
# once per row: a daily job's output has a row per run, each probing the same latest run.
LEVEL_COUNTED = f"""CASE WHEN r.run_id = '{asof.STATIC_RUN}' THEN r.first_seen <= %(as_of)s
               ELSE r.run_id = lj.run_id END"""
LATEST_RUNS = """SELECT j.job_id, {run} AS run_id
    FROM (SELECT DISTINCT c.job_id FROM candidates c) j"""
NO_RUNS = "SELECT NULL::uuid AS job_id, NULL::uuid AS run_id WHERE false"


def _level(direction: str, rule: str) -> str:
    up = direction == "up"
    if rule == "cumulative":  # (every run of the window: checked row by row)
        runs, counted = NO_RUNS, COUNTED_IN_WINDOW
    else:
        run = asof.latest_run("j.job_id", since=rule == "recent")
        runs, counted = LATEST_RUNS.format(run=run), LEVEL_COUNTED
    reports = UP_REPORTS if up else DOWN_REPORTS
    return LEVEL.format(reports=reports, runs=runs, counted=counted)


# By (direction, rule).
LEVELS = {(d, rule): _level(d, rule) for d in ("up", "down") for rule in asof.RULES}
JOB_COUNTS_BY_RULE = {rule: JOB_COUNTS.format(counted=_counted(rule)) for rule in asof.RULES}
EDGE_TABLES = {
    "up": {"table": "column_lineage", "near": "out"},
    "down": {"table": "column_inputs", "near": "in"},
}
NAMES = {d: NAMES_WITH_EDGES.format(**t) for d, t in EDGE_TABLES.items()}
FAR_DATASETS = {d: DATASETS_OF.format(**t) for d, t in EDGE_TABLES.items()}

# What the answer names: the dataset of each name (its display name; as of T, its
# display name then), and the jobs.
NAME_REFS = """
SELECT n.namespace, n.name, d.id, {display}
FROM unnest(%(namespaces)s::text[], %(names)s::text[]) AS k(namespace, name)
JOIN readmodel.dataset_names n ON n.namespace = k.namespace AND n.name = k.name
JOIN readmodel.datasets d ON d.id = n.dataset_id{display_join}
"""
JOB_REFS = "SELECT id, namespace, name FROM readmodel.jobs WHERE id = ANY(%(ids)s::uuid[])"
DATASET_REF = """
SELECT d.id, {display}, d.first_seen FROM readmodel.datasets d{display_join}
WHERE d.id = coalesce((SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s)
"""
DISPLAY_NOW = {"display": "d.namespace, d.name", "display_join": ""}
DISPLAY_AS_OF = {
    "display": "coalesce(dn.namespace, d.namespace), coalesce(dn.name, d.name)",
    "display_join": f"\nLEFT JOIN LATERAL {asof.display_name_at('d.id')} dn ON true",
}
# Restricted to an Access's namespaces (binding `%(readable)s`): a dataset shows its most
# table-like readable name (first seen by `%(as_of)s`, as of a moment), never a hidden one.
_RESTRICTED = visibility.RESTRICTED
VISIBLE_DISPLAY = f"""(
    SELECT n.namespace, n.name FROM readmodel.dataset_names n
    WHERE n.dataset_id = d.id AND n.first_seen <= coalesce(%(as_of)s::timestamptz, 'infinity'){
    visibility.name_visible(_RESTRICTED, "n")
}
    ORDER BY {asof.display_rank("n")}, n.first_seen, n.namespace, n.name LIMIT 1)"""
DISPLAY_RESTRICTED = {
    "display": "dn.namespace, dn.name",
    "display_join": f"\nJOIN LATERAL {VISIBLE_DISPLAY} dn ON true",
}
DATASET_REF_RESTRICTED = DATASET_REF.format(**DISPLAY_RESTRICTED)
JOB_REFS_RESTRICTED = JOB_REFS + visibility.job_visible(_RESTRICTED, "jobs")

Direction = Annotated[
    Literal["upstream", "downstream", "both"],
    Meta(description="Follow the data flow backwards, forwards, or both ways."),
]
_DIRS = {"upstream": ["up"], "downstream": ["down"], "both": ["up", "down"]}


class ColumnLineageQuery(asof.AsOfViewed, frozen=True):
    direction: Direction = "upstream"
    depth: Annotated[int, Meta(ge=1, le=limits.MAX_DEPTH, description="Hops of field edges.")] = (
        limits.DEFAULT_DEPTH
    )
    field: Annotated[
        params.Name | None,
        Meta(
            description="Only the lineage of this field of the dataset: upstream, the fields "
            "it derives from; downstream, those derived from it (no edges: a field without).",
        ),
    ] = None
    max_nodes: Annotated[
        int,
        Meta(
            ge=1,
            le=limits.NODE_LIMIT,
            description="Field limit: the walk keeps at most this many fields at the far "
            "ends of its edges; past it `truncated` is set.",
        ),
    ] = limits.NODE_LIMIT


COLUMN_OP = Operation(
    "GET",
    "/datasets/{dataset_id}/column-lineage",
    "getColumnLineage",
    "The field-level lineage of a dataset",
    models_lineage.ColumnLineage,
    tag="lineage",
    etag_from_position=True,
    path_params=DatasetPath,
    query=ColumnLineageQuery,
    expensive=True,
    not_found=True,
    description="Field edges from the `columnLineage` facet: upstream, the fields this "
    "dataset's fields derive from (and theirs, up to `depth`); downstream, the fields "
    "derived from its fields. Each edge names its datasets (display name) and the job of "
    "its latest report (`job`), and the jobs whose reports hold it (`jobs`: up to "
    f"{limits.EDGE_JOBS} of them, by name; `job_count`: all of them). The walk expands "
    f"each field once, nearest first, and stops at {limits.EDGE_LIMIT:,} edges, `max_nodes` "
    f"fields at the far ends of its edges, or "
    f"{limits.VISIT_LIMIT:,} edges looked at (counting only the edges that hold), with "
    "`truncated` true. The field edges each job's latest run started by `as_of` (else now) "
    "reported (in its latest `columnLineage` facet for the dataset), and those of the job's "
    "latest static declaration (JobEvent) if it had made one by then: the rule of "
    "`/lineage`; `view` and `since` as in `/lineage`. `jobs` and `job_count` count the jobs "
    "whose reports hold the edge. `field` follows one field of the dataset."
    + HIDDEN_NODES
    + " An edge is shown when both names it was reported under are readable; `jobs` and "
    "`job_count` count the visible jobs among the first "
    f"{limits.EDGE_JOBS}.",
)
resource = Resource()

EdgeKey = tuple[str, str, str, str, str, str]  # out namespace, name, field; in ...
# A report's pair as stored: out field; in namespace, name, field; transformations (JSON).
StoredPair = tuple[str, str, str, str, msgspec.Raw]


@dataclass
class _Edge:
    depth: int
    transformations: str
    job: uuid.UUID | None
    jobs: list[uuid.UUID]
    job_count: int


@dataclass
class Walk:
    """The edges found so far (least depth each), the fields at their far ends (at most
    `max_fields`), the datasets of the names met, and what the walk has looked at."""

    max_fields: int = limits.NODE_LIMIT
    edges: dict[EdgeKey, _Edge] = field(default_factory=dict)
    fields: set[tuple[str, str, str]] = field(default_factory=set)
    datasets: dict[tuple[str, str], uuid.UUID] = field(default_factory=dict)
    reports: dict[bytes, list[StoredPair]] = field(default_factory=dict)
    visited: int = 0
    truncated: bool = False


@dataclass(slots=True)
class _Pair:
    """A pair found in a level's reports: from the latest of them, its transformations and
    job; the jobs of all of them, in the order they first sent a report (a list shared
    with other pairs: replaced, never changed in place)."""

    transformations: msgspec.Raw
    job: uuid.UUID | None
    latest: tuple[Any, Any]  # (eventTime, seq) of the latest event that sent it
    jobs: list[uuid.UUID]
    job_count: int
    reports: list[tuple[str, str, bytes]] = field(default_factory=list)
    partial: bool = False  # a report's jobs were more than the level read


# A pair a level found: the row (LEVEL) of the report it came in, and the pair as stored.
Found = tuple[Any, StoredPair]
_report_pairs = msgspec.json.Decoder(list[StoredPair])
_NO_JOB = uuid.UUID(int=0)


def _level_pairs(
    reports: list[Any], direction: str, asked: dict[int, set[str]] | None, walk: Walk
) -> list[Found]:
    """A level's report rows (LEVEL) as the pairs in them that touch a field asked
    (`asked`: by the name's ordinal; None: every field of the names), each with its
    report's row: a pair is never copied (3,000 pairs of a wide table cost 2.3 ms so).
    Each report's pairs are decoded once per walk (`walk.reports`)."""
    for r in reports:
        if r[13] is not None:  # (the first row of the report)
            try:
                walk.reports[bytes(r[12])] = _report_pairs.decode(r[13])
            except msgspec.DecodeError:  # (never written so; left out rather than a 500)
                walk.reports[bytes(r[12])] = []
    found: list[Found] = []
    for r in reports:
        pairs = walk.reports.get(bytes(r[12]), [])
        fields = None if asked is None else asked.get(r[0], set())
        if direction == "up":
            found += [(r, p) for p in pairs if fields is None or p[0] in fields]
        else:
            k_ns, k_name = r[1], r[2]
            found += [
                (r, p)
                for p in pairs
                if p[1] == k_ns and p[2] == k_name and (fields is None or p[3] in fields)
            ]
    return found


def _pairs(found: list[Found]) -> dict[EdgeKey, _Pair]:
    """The level's pairs (a pair and report each) by pair, the reports taken in the order
    they were first sent (then by job). A report's pairs come together and share its
    order, so its rows are sorted, not each pair (sorting 3,000 pairs compared their
    jobs' ids in Python)."""
    runs: list[tuple[Any, list[StoredPair]]] = []  # (a report's row, its pairs), in order
    for r, p in found:
        if runs and runs[-1][0] is r:
            runs[-1][1].append(p)
        else:
            runs.append((r, [p]))
    runs.sort(key=lambda run: (run[0][11], run[0][5] or _NO_JOB))
    pairs: dict[EdgeKey, _Pair] = {}
    for r, stored in runs:
        out_ns, out_name, job, latest = r[3], r[4], r[5], (r[9], r[10])
        jobs, job_count = r[7], r[8]
        partial = job_count > len(jobs)
        report = (out_ns, out_name, bytes(r[12]))
        for p in stored:
            key: EdgeKey = (out_ns, out_name, p[0], p[1], p[2], p[3])
            pair = pairs.get(key)
            if pair is None:  # (one report: exactly its jobs)
                pairs[key] = _Pair(p[4], job, latest, jobs, job_count, [report], partial)
                continue
            if latest > pair.latest:
                pair.transformations, pair.job, pair.latest = p[4], job, latest
            if report in pair.reports:  # (the report listed the pair twice)
                continue
            pair.reports.append(report)
            pair.jobs = pair.jobs + [j for j in jobs if j not in pair.jobs]
            pair.job_count = len(pair.jobs)
            pair.partial |= partial
    return pairs


async def _count_jobs(
    conn: AsyncConnection[Any],
    pairs: dict[EdgeKey, _Pair],
    as_of: dt.datetime,
    window: tuple[str, dt.datetime | None],
) -> None:
    """Counts the jobs of each pair found in several reports, one of which had more jobs
    than the level read (their union is not known from the first EDGE_JOBS of each)."""
    several = [p for p in pairs.values() if len(p.reports) > 1 and p.partial]
    if not several:
        return
    asked = [(i, report) for i, pair in enumerate(several) for report in pair.reports]
    for i, count in await rows(
        conn,
        JOB_COUNTS_BY_RULE[window[0]],
        {
            "pairs": [i for i, _ in asked],
            "namespaces": [r[0] for _, r in asked],
            "names": [r[1] for _, r in asked],
            "reports": [r[2] for _, r in asked],
            "as_of": as_of,
            "since": window[1],
        },
    ):
        several[i].job_count = count


async def walk_fields(
    conn: AsyncConnection[Any],
    starts: Sequence[tuple[uuid.UUID, str | None]],
    direction: str,
    depth: int,
    as_of: dt.datetime,
    walk: Walk,
    window: tuple[str, dt.datetime | None] = ("latest", None),
    access: Access = EVERYTHING,
) -> None:
    """Adds the edges within `depth` of `starts` (dataset, field: None for every field of
    the dataset, then the only start) in `direction` to `walk`, as of `as_of` by the rule
    and window of `window` (asof.window). Restricted by `access`, an edge counts only when
    both names it was reported under are readable: the walk never passes through a hidden
    dataset, and no edge names a hidden name (`reported_as`). The walk keeps at most
    `walk.max_fields` fields at the far ends of its edges (`truncated` past them). It
    leaves the transaction planning without sequential scans: column_edges, which reads
    the walk's answer, plans as usual again."""
    # Index probes whatever the statistics: on a small column_lineage_runs the planner
    # hashed the whole table against a level's names (a scan per level once it grows). Set
    # once a walk, in its first statement's round trip, and left for column_edges to undo
    # in its own: each SET was a round trip of its own.
    setting: Planner | None = SEQSCAN
    frontier = list(starts)
    start_datasets = {d for d, _ in starts}
    every_field = any(f is None for _, f in starts)
    seen: set[tuple[uuid.UUID, str]] = {(d, f) for d, f in starts if f is not None}
    names: dict[uuid.UUID, list[tuple[str, str]]] = {}  # a dataset's names with edges
    for level in range(1, depth + 1):
        unknown = list({d for d, _ in frontier if d not in names})
        if unknown:
            for d in unknown:
                names[d] = []
            (found_names,) = await pipelined(
                conn, [(NAMES[direction], {"ids": unknown})], off=setting, restore=False
            )
            setting = None
            for d, ns, name in found_names:
                names[d].append((ns, name))
        lookups = list({(ns, name): None for d, _ in frontier for ns, name in names[d]})
        if not lookups:
            break
        ordinal = {name: i for i, name in enumerate(lookups, 1)}
        fields = [(ordinal[n], f) for d, f in frontier if f is not None for n in names[d]]
        cap = limits.VISIT_LIMIT - walk.visited
        reports = await rows(
            conn,
            LEVELS[(direction, window[0])],
            {
                "namespaces": [k[0] for k in lookups],
                "names": [k[1] for k in lookups],
                "cap": cap + 1,
                "known": list(walk.reports),
                "as_of": as_of,
                "since": window[1],
            },
        )
        asked: dict[int, set[str]] | None = None  # (None: every field)
        if not (level == 1 and every_field):
            asked = {}
            for i, f in fields:
                asked.setdefault(i, set()).add(f)
        found = _level_pairs(reports, direction, asked, walk)
        if len(found) > cap or len(reports) > cap:
            walk.truncated = True
            found = found[:cap]
        if access.restricted:
            found = [(r, p) for r, p in found if access.reads(r[3]) and access.reads(p[1])]
        pairs = _pairs(found)
        await _count_jobs(conn, pairs, as_of, window)
        walk.visited += len(pairs)
        far_names = {(k[3], k[4]) if direction == "up" else (k[0], k[1]) for k in pairs}
        unseen = [n for n in far_names if n not in walk.datasets]
        if unseen and level < depth:  # (the last level's far ends start no level: unread)
            found_names = await rows(
                conn,
                FAR_DATASETS[direction],
                {
                    "namespaces": [n[0] for n in unseen],
                    "names": [n[1] for n in unseen],
                    "looked_up": list(names),
                },
            )
            for ns, name, d, with_edges in found_names:
                if with_edges:
                    names.setdefault(d, []).append((ns, name))
                else:
                    walk.datasets[(ns, name)] = d
            for d in {d for _, _, d, _ in found_names} - names.keys():
                names[d] = []  # (looked up: no name of it has edges)
        next_frontier: dict[tuple[uuid.UUID, str], None] = {}
        far_at = 3 if direction == "up" else 0  # (where the far end's name is in a key)
        edges, kept = walk.edges, walk.fields
        for key, pair in pairs.items():
            far_name, far_field = (key[far_at], key[far_at + 1]), key[far_at + 2]
            if key not in edges:  # (found before: at a lesser depth, or the other way)
                far_key = (*far_name, far_field)
                if len(edges) >= limits.EDGE_LIMIT or (
                    far_key not in kept and len(kept) >= walk.max_fields
                ):
                    walk.truncated = True
                    continue
                kept.add(far_key)
                edges[key] = _Edge(
                    level,
                    bytes(pair.transformations).decode(),
                    pair.job,
                    pair.jobs[: limits.EDGE_JOBS],
                    pair.job_count,
                )
            far = walk.datasets.get(far_name)
            if far is None or far in start_datasets or (far, far_field) in seen:
                continue
            seen.add((far, far_field))
            next_frontier[(far, far_field)] = None
        if walk.truncated or not next_frontier:
            break
        frontier = list(next_frontier)


@resource.add(COLUMN_OP)
async def get_column_lineage(request: Request) -> Response:
    path: DatasetPath = COLUMN_OP.parse_path(request)
    query: ColumnLineageQuery = COLUMN_OP.parse_query(request)
    walk = Walk(max_fields=query.max_nodes)
    moment = asof.NOW if query.as_of is None else query.as_of  # (now: as of now)
    window = asof.window(query.view, query.since)
    access = await access_of(request)
    async with connection(request) as conn:
        dataset = await dataset_ref(conn, path.dataset_id, query.as_of, access)
        for direction in _DIRS[query.direction]:
            await walk_fields(
                conn,
                [(dataset.id, query.field)],
                direction,
                query.depth,
                moment,
                walk,
                window,
                access,
            )
        edges = await column_edges(conn, walk, query.as_of, access)
    return json_response(
        request,
        models_lineage.ColumnLineage(dataset=dataset, edges=edges, truncated=walk.truncated),
    )


def _display(as_of: dt.datetime | None, access: Access) -> dict[str, str]:
    """How the answer names datasets: now, as of a moment, or among readable names."""
    if access.restricted:
        return DISPLAY_RESTRICTED
    return DISPLAY_NOW if as_of is None else DISPLAY_AS_OF


async def dataset_ref(
    conn: AsyncConnection[Any], dataset_id: uuid.UUID, as_of: dt.datetime | None, access: Access
) -> models.DatasetRef:
    """The dataset a walk starts at, under its display name (the dataset it was merged
    into); 404 when unknown or hidden, `not-yet` when first seen after `as_of`."""
    readable = access.sql_params() if access.restricted else {}
    found = await rows(
        conn,
        DATASET_REF_RESTRICTED
        if access.restricted
        else DATASET_REF.format(**_display(as_of, access)),
        {"id": dataset_id, "as_of": as_of} | readable,
    )
    if not found:  # (restricted: a dataset without a readable name is hidden)
        raise not_found("dataset", dataset_id)
    asof.check_seen("dataset", dataset_id, found[0][3], as_of)
    return models.DatasetRef(id=found[0][0], namespace=found[0][1], name=found[0][2])


async def column_edges(
    conn: AsyncConnection[Any], walk: Walk, as_of: dt.datetime | None, access: Access
) -> list[models_lineage.ColumnEdge]:
    """The walk's edges as the answer shows them, nearest first: each name under its
    dataset's display name, its jobs named (restricted: the visible ones)."""
    readable = access.sql_params() if access.restricted else {}
    names = {(k[0], k[1]) for k in walk.edges} | {(k[3], k[4]) for k in walk.edges}
    job_ids = {e.job for e in walk.edges.values() if e.job} | {
        j for e in walk.edges.values() for j in e.jobs
    }
    # One round trip: the walk's setting undone (walk_fields), the names and the jobs.
    name_rows, job_rows = await pipelined(
        conn,
        [
            (
                NAME_REFS.format(**_display(as_of, access)),
                {"namespaces": [n[0] for n in names], "names": [n[1] for n in names]}
                | {"as_of": as_of}
                | readable,
            ),
            (
                JOB_REFS_RESTRICTED if access.restricted else JOB_REFS,
                {"ids": list(job_ids)} | readable,
            ),
        ],
        on=SEQSCAN,
    )
    refs = {(r[0], r[1]): models.DatasetRef(id=r[2], namespace=r[3], name=r[4]) for r in name_rows}
    jobs = {r[0]: models.JobRef(id=r[0], namespace=r[1], name=r[2]) for r in job_rows}
    edges = []
    columns = _Columns(refs)
    shown_as: dict[str, msgspec.Raw] = {}  # (a wide table's edges share a few texts)
    for key, e in sorted(walk.edges.items(), key=lambda item: (item[1].depth, item[0])):
        job_count = e.job_count
        if access.restricted:  # (the jobs it may see, of the first EDGE_JOBS)
            job_count = sum(j in jobs for j in e.jobs)
        named = [jobs[j] for j in e.jobs if j in jobs]
        if len(named) > 1:
            named.sort(key=lambda j: (j.namespace, j.name))
        edges.append(
            models_lineage.ColumnEdge(
                from_=columns.of(key[3], key[4], key[5]),
                to=columns.of(key[0], key[1], key[2]),
                transformations=_transformations(e.transformations, shown_as),
                job=jobs.get(e.job) if e.job else None,
                jobs=named,
                job_count=job_count,
                depth=e.depth,
            )
        )
    return edges


def _transformations(text: str, shown_as: dict[str, msgspec.Raw]) -> msgspec.Raw:
    """parts.transformations of `text`, checked once per answer when it holds (a text it
    cleans is cleaned, and counted, each time, as before)."""
    found = shown_as.get(text)
    if found is None:
        found = parts.transformations(text)
        if bytes(found) == text.encode():  # (as sent: it holds)
            shown_as[text] = found
    return found


class _Columns:
    """Fields under their dataset's display name (`refs`, by the name the facet used),
    each name's parts made once (a wide table's 1,000 edges name two datasets)."""

    def __init__(self, refs: dict[tuple[str, str], models.DatasetRef]) -> None:
        self.refs = refs
        self.names: dict[tuple[str, str], tuple[Any, str, str, models.NameKey]] = {}

    def of(self, namespace: str, name: str, field: str) -> models_lineage.ColumnRef:
        known = self.names.get((namespace, name))
        if known is None:
            dataset = self.refs.get((namespace, name))
            shown = dataset or models.NameKey(namespace=namespace, name=name)
            reported = models.NameKey(namespace=namespace, name=name)
            known = (dataset, shown.namespace, shown.name, reported)
            self.names[(namespace, name)] = known
        dataset, shown_ns, shown_name, reported = known
        return models_lineage.ColumnRef(
            dataset=dataset, namespace=shown_ns, name=shown_name, field=field, reported_as=reported
        )
