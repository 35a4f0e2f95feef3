"""Lineage depth 2 (jobs) from 200 random nodes, end to end through `GET /api/v1/lineage`;
impact (`GET /api/v1/impact`) from failed runs and the graph's diff
(`GET /api/v1/lineage/diff`) between two moments, at the same depth.

The graph is the workload's (about 100,000 datasets and jobs, fan-in and fan-out), folded
by the real projector. The API's `depth` counts jobs (so a graph ends on datasets): depth 2
is 4 hops from a dataset and 5 from a job. The baseline is a bare recursive CTE over a
plain `edges(src, dst)` table holding the same graph, walked the same way (upstream and
downstream, as many hops as the API walks from that node, then the edges between the nodes
reached), timed with psycopg on one connection, no HTTP."""

from __future__ import annotations

import datetime as dt
import random
import time
import urllib.parse
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec
import psycopg

from bench import loadgen
from bench.context import Context
from bench.datagen import START_TIME, Generator, Graph
from bench.harness import Service
from bench.report import Row, below, now

GROUP = "log"

BARE_TABLE = """
CREATE TABLE bench_edges (src {type} NOT NULL, dst {type} NOT NULL);
"""
BARE_INDEXES = """
CREATE INDEX bench_edges_src ON bench_edges (src);
CREATE INDEX bench_edges_dst ON bench_edges (dst);
ANALYZE bench_edges;
"""
BARE_LINEAGE = """
WITH RECURSIVE walk(dir, node, depth) AS (
    SELECT d.dir, %(start)s::{type}, 0 FROM unnest(ARRAY['up', 'down']) AS d(dir)
  UNION
    SELECT w.dir, CASE w.dir WHEN 'up' THEN e.src ELSE e.dst END, w.depth + 1
    FROM walk w
    JOIN bench_edges e ON (w.dir = 'up' AND e.dst = w.node) OR (w.dir = 'down' AND e.src = w.node)
    WHERE w.depth < %(depth)s
),
reached AS (SELECT node, min(depth) AS depth FROM walk GROUP BY node)
SELECT 'node', node, NULL::{type} FROM reached
UNION ALL
SELECT 'edge', e.src, e.dst FROM bench_edges e
JOIN reached a ON a.node = e.src JOIN reached b ON b.node = e.dst
"""
NAMES = """
SELECT 'dataset', namespace, name, dataset_id FROM readmodel.dataset_names
UNION ALL
SELECT 'job', namespace, name, id FROM readmodel.jobs
"""


class Graphish(msgspec.Struct):
    nodes: list[Any]
    edges: list[Any]
    truncated: bool = False


def rows(ctx: Context) -> list[Row]:
    cmd = ctx.command(GROUP)
    d = ctx.sizes.lineage_depth
    bare = "bare recursive CTE"
    client = f"{loadgen.ASYNCIO_CLIENT}; baseline: psycopg"
    return [
        Row(f"lineage depth {d} p50, ms", "ms", baseline_label=bare, command=cmd, client=client),
        Row(
            f"lineage depth {d} p95, ms",
            "ms",
            baseline_label=bare,
            target="< 10",
            check=below(10),
            command=cmd,
            client=client,
        ),
        Row(
            f"as-of lineage depth {d} p95, ms",
            "ms",
            baseline_label=bare + " (p95)",
            target="< 25",
            check=below(25),
            command=cmd,
            client=client,
        ),
    ]


def impact_rows(ctx: Context) -> list[Row]:
    """The rows of impact and of the lineage diff, after `rows` in the `log` group."""
    cmd = ctx.command(GROUP)
    d = ctx.sizes.lineage_depth
    return [
        Row(
            f"{what} depth {d} p95, ms",
            "ms",
            baseline_label="bare recursive CTE (p95)",
            target="< 25",
            check=below(25),
            command=cmd,
            client=f"{loadgen.ASYNCIO_CLIENT}; baseline: psycopg",
        )
        for what in ("impact", "lineage diff")
    ]


def _keys(url: str, graph: Graph) -> list[str]:
    """The API key (`dataset:<id>` / `job:<id>`) of every graph node, by node number."""
    with psycopg.connect(url) as conn:
        ids = {(kind, ns, name): id_ for kind, ns, name, id_ in conn.execute(NAMES)}
    keys = []
    for ds in graph.datasets:
        keys.append(f"dataset:{ids.get(('dataset', ds.namespace, ds.name), uuid.UUID(int=0))}")
    for task in graph.tasks:
        keys.append(f"job:{ids.get(('job', task.namespace, task.name), uuid.UUID(int=0))}")
    return keys


def _as_of_supported(api: Service) -> bool:
    """Whether the API documents `as_of` on /lineage (unknown query parameters are ignored,
    so a 200 alone would not say the time-travel feature is there)."""
    answer = loadgen.get_many(api.base_url, ["/api/v1/openapi.json"])
    if answer.statuses != [200]:
        return False
    doc = msgspec.json.decode(answer.bodies[0])
    op = doc.get("paths", {}).get("/api/v1/lineage", {}).get("get", {})
    return any(p.get("name") == "as_of" for p in op.get("parameters", []))


def measure(
    ctx: Context, out: list[Row], url: str, graph: Graph, gen: Generator, api: Service
) -> None:
    """The lineage rows, then (when `out` has them: impact_rows) impact and diff."""
    s = ctx.sizes
    # Start nodes: any dataset some job touches, any job with lineage (node numbers as in
    # Graph.edges: datasets first, then task jobs).
    linked = sorted({node for edge in graph.edges() for node in edge})
    starts = random.Random(ctx.seed + 5).sample(linked, min(len(linked), s.lineage_queries))
    keys = _keys(url, graph)
    unknown = sum(1 for n in starts if keys[n].endswith(str(uuid.UUID(int=0))))

    # The baseline: the same graph as plain bigint edges.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_edges")
        conn.execute(BARE_TABLE.format(type="bigint"))
        with conn.cursor() as cur, cur.copy("COPY bench_edges (src, dst) FROM STDIN") as copy:
            for edge in graph.edges():
                copy.write_row(edge)
        conn.execute(BARE_INDEXES)
    population = (
        f"drawn at random (seed) from {len(graph.datasets):,} datasets and "
        f"{len(graph.tasks):,} jobs with lineage ({graph.n_jobs:,} jobs in all)"
    )
    middle = START_TIME + (gen.clock - START_TIME) / 2
    measure_starts(
        ctx,
        out,
        url,
        api,
        [keys[n] for n in starts],
        starts,
        "bigint",
        middle,
        population,
        f"; {unknown} start nodes not found in the read models" if unknown else "",
    )
    if len(out) > 3:
        impact, diff = out[3:5]
        impact.baseline = diff.baseline = out[1].baseline
        _impact(ctx, impact, url, api)
        depth = s.lineage_depth // 2
        lineage_paths = [f"/api/v1/lineage?node={keys[n]}&depth={depth}" for n in starts]
        _diff(ctx, diff, lineage_paths, gen, api)


def bare_walks(
    url: str, starts: Sequence[object], hops: Sequence[int], node_type: str
) -> tuple[list[float], list[int]]:
    """The bare CTE over bench_edges from each start, `hops` deep (after 10 warm-ups):
    (ms, nodes)."""
    bare_ms, bare_nodes = [], []
    query = BARE_LINEAGE.format(type=node_type)
    walks = list(zip(starts, hops, strict=True))
    with psycopg.connect(url, autocommit=True) as conn:
        for warm in (True, False):
            for start, depth in walks[:10] if warm else walks:
                t0 = time.perf_counter()
                found = conn.execute(
                    query, {"start": start, "depth": depth}, prepare=True
                ).fetchall()
                if not warm:
                    bare_ms.append((time.perf_counter() - t0) * 1000)
                    bare_nodes.append(sum(1 for r in found if r[0] == "node"))
    return bare_ms, bare_nodes


def measure_starts(
    ctx: Context,
    out: list[Row],
    url: str,
    api: Service,
    keys: list[str],
    bare_starts: Sequence[object],
    node_type: str,
    middle: dt.datetime,
    population: str,
    remark: str = "",
) -> None:
    """Times the API's lineage (now and as of `middle`) from the nodes `keys` (API keys),
    against the bare CTE over bench_edges (of `node_type` ids) from `bare_starts`."""
    p50, p95, as_of = out[:3]
    # `depth` counts jobs: 2 * depth hops from a dataset, one more from a job
    depth = ctx.sizes.lineage_depth // 2
    hops = [2 * depth + key.startswith("job:") for key in keys]
    bare_ms, bare_nodes = bare_walks(url, bare_starts, hops, node_type)
    paths = [f"/api/v1/lineage?node={key}&depth={depth}&direction=both" for key in keys]
    answers = loadgen.timed(api.base_url, paths)
    api_ms = answers.latencies_ms
    graphs = loadgen.decoded(answers, Graphish)
    bad = sum(1 for st in answers.statuses if st != 200)
    p50.value, p50.baseline = loadgen.percentile(api_ms, 50), loadgen.percentile(bare_ms, 50)
    p95.value, p95.baseline = loadgen.percentile(api_ms, 95), loadgen.percentile(bare_ms, 95)
    mean_nodes = sum(len(g.nodes) for g in graphs) / max(1, len(graphs))
    mean_edges = sum(len(g.edges) for g in graphs) / max(1, len(graphs))
    p95.note = "the same run as the p50 row."
    p50.note = (
        f"{len(paths)} start nodes {population}, "
        f"`GET /api/v1/lineage?node=...&depth={depth}&direction=both` ({2 * depth} hops from "
        f"a dataset, {2 * depth + 1} from a job, as the bare CTE), one keep-alive "
        f"connection, one request at a time after 10 warm-up requests; {bad} answers not "
        f"200; on average {mean_nodes:,.0f} nodes and {mean_edges:,.0f} edges per answer "
        f"({sum(g.truncated for g in graphs)} truncated), the bare CTE "
        f"{sum(bare_nodes) / max(1, len(bare_nodes)):,.0f} nodes" + remark + "."
    )
    as_of.baseline = p95.baseline
    if not _as_of_supported(api):
        as_of.note = (
            "n/a: `GET /api/v1/lineage` does not document an `as_of` parameter yet "
            "(the time-travel feature has not landed)."
        )
    else:
        stamp = urllib.parse.quote(middle.isoformat())
        as_paths = [p + f"&as_of={stamp}" for p in paths]
        as_answers = loadgen.get_many(api.base_url, as_paths)
        as_ms = as_answers.latencies_ms
        rejected = sum(1 for st in as_answers.statuses if st == 400)
        # 404: a start node first seen after the moment (it did not exist yet)
        later = sum(1 for st in as_answers.statuses if st == 404)
        if rejected:
            as_of.note = f"n/a: the endpoint rejected as_of ({rejected} of {len(as_paths)} 400)."
        else:
            as_of.value = loadgen.percentile(as_ms, 95)
            as_graphs = loadgen.decoded(as_answers, Graphish)
            as_nodes = sum(len(g.nodes) for g in as_graphs) / max(1, len(as_graphs))
            as_of.note = (
                f"the same {len(as_paths)} queries with `as_of={middle.isoformat()}` "
                f"(the middle of the log's event times): {len(as_graphs)} answered 200 with "
                f"{as_nodes:,.0f} nodes on average, {later} 404 (start node first seen "
                "later)."
            )
    for r in out:
        r.measured_at = now()


# The failed runs of the log (one task run in 25 fails), in a stable order to sample from.
FAILED_RUNS = "SELECT id FROM readmodel.runs WHERE state = 'FAIL' ORDER BY id"


def _summary(answers: loadgen.Answers) -> tuple[int, float, int]:
    """(answers not 200, mean nodes per 200 answer, truncated answers)."""
    graphs = loadgen.decoded(answers, Graphish)
    bad = sum(1 for st in answers.statuses if st != 200)
    nodes = sum(len(g.nodes) for g in graphs) / max(1, len(graphs))
    return bad, nodes, sum(g.truncated for g in graphs)


def _impact(ctx: Context, row: Row, url: str, api: Service) -> None:
    """`GET /api/v1/impact?node=run:<id>` from failed runs drawn at random, as many jobs
    deep as the lineage rows (2 * depth + 1 hops from a run's job)."""
    depth = ctx.sizes.lineage_depth // 2
    with psycopg.connect(url) as conn:
        failed = [r[0] for r in conn.execute(FAILED_RUNS)]
    runs = random.Random(ctx.seed + 7).sample(failed, min(len(failed), ctx.sizes.lineage_queries))
    paths = [f"/api/v1/impact?node=run:{run}&depth={depth}" for run in runs]
    answers = loadgen.timed(api.base_url, paths)
    bad, nodes, truncated = _summary(answers)
    if bad == len(paths):
        row.note = f"n/a: no answer was 200 ({answers.statuses[:3]} ...)"
        return
    row.record(
        loadgen.percentile(answers.latencies_ms, 95),
        f"{len(paths)} failed runs drawn at random (seed) from the log's {len(failed):,}, "
        f"`GET /api/v1/impact?node=run:<id>&depth={depth}` (its attempted outputs, then "
        f"downstream), one request at a time after 10 warm-up requests; p50 "
        f"{loadgen.percentile(answers.latencies_ms, 50):.2f} ms; {bad} answers not 200; "
        f"{nodes:,.0f} nodes per answer on average ({truncated} truncated). Baseline: the "
        "bare CTE's p95 of the lineage rows.",
    )


def _diff(ctx: Context, row: Row, paths: list[str], gen: Generator, api: Service) -> None:
    """`GET /api/v1/lineage/diff` from the lineage rows' start nodes, between a quarter and
    three quarters of the log's event times."""
    span = gen.clock - START_TIME
    before, after = START_TIME + span / 4, START_TIME + span * 3 / 4
    quote = urllib.parse.quote
    moments = f"&from={quote(before.isoformat())}&to={quote(after.isoformat())}"
    diff_paths = [p.replace("/api/v1/lineage?", "/api/v1/lineage/diff?") + moments for p in paths]
    answers = loadgen.timed(api.base_url, diff_paths)
    bodies = loadgen.decoded(answers, Diffish)
    bad = sum(1 for st in answers.statuses if st != 200)
    if not bodies:
        row.note = f"n/a: no answer was 200 ({answers.statuses[:3]} ...)"
        return
    row.value = loadgen.percentile(answers.latencies_ms, 95)
    n = max(1, len(bodies))
    row.note = (
        f"the lineage rows' {len(diff_paths)} start nodes, `GET /api/v1/lineage/diff?node=..."
        f"&depth={ctx.sizes.lineage_depth // 2}&from=...&to=...` between "
        f"{before.isoformat()} and {after.isoformat()} (a quarter and three quarters into the "
        f"log's event times): two as-of walks and the schemas at both moments per answer; "
        f"p50 {loadgen.percentile(answers.latencies_ms, 50):.2f} ms; {bad} answers not 200 "
        f"(404: first seen after `to`); per answer on average "
        f"{sum(len(b.nodes_added) for b in bodies) / n:,.1f} nodes added, "
        f"{sum(len(b.nodes_removed) for b in bodies) / n:,.1f} removed, "
        f"{sum(len(b.schema_changes) for b in bodies) / n:,.2f} schema changes. Baseline: "
        "the bare CTE's p95 of the lineage rows."
    )


class Diffish(msgspec.Struct):
    nodes_added: list[Any]
    nodes_removed: list[Any]
    schema_changes: list[Any]
