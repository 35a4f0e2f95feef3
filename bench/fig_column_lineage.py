"""Column lineage from 200 random datasets, end to end through the API, now and as of a
moment; and the impact of a change to 200 random fields (`/impact?node=field:...`).

`GET /api/v1/datasets/{id}/column-lineage?direction=both&depth=5`: the field edges
around every field of a dataset that has column lineage (from the `columnLineage` facets
the workload's outputs carry), then the same with `as_of` the middle of the log's event
times, which walks the edges each job's latest run by then reported. No baseline: the
row is there so a plan that scans every run's edges (2.4 s a request, found in the as-of
walk once) shows up as a figure rather than as a slow Cockpit page.
"""

from __future__ import annotations

import datetime as dt
import random
import urllib.parse

import msgspec
import psycopg

from bench import loadgen
from bench.context import Context
from bench.harness import Service
from bench.report import Row, below, now

GROUP = "log"

# Datasets that are the output side of some field edge, under the id the API knows them by.
WITH_COLUMN_LINEAGE = """
SELECT DISTINCT n.dataset_id FROM readmodel.column_lineage c
JOIN readmodel.dataset_names n ON n.namespace = c.out_namespace AND n.name = c.out_name
ORDER BY 1
"""


# Fields that some column lineage derives from (each report's first pair's input), under
# the id of their dataset.
FIELDS_WITH_DEPENDENTS = """
SELECT DISTINCT n.dataset_id, r.pairs->0->>3 FROM readmodel.column_reports r
JOIN readmodel.dataset_names n ON n.namespace = r.pairs->0->>1 AND n.name = r.pairs->0->>2
ORDER BY 1, 2
"""


class Answer(msgspec.Struct):
    edges: list[msgspec.Raw]
    truncated: bool = False


def rows(ctx: Context) -> list[Row]:
    cmd = ctx.command(GROUP)
    d = ctx.sizes.lineage_depth
    return [
        Row(f"column lineage depth {d} p95, ms", "ms", command=cmd, client=loadgen.ASYNCIO_CLIENT),
        Row(
            f"as-of column lineage depth {d} p95, ms",
            "ms",
            target="< 25 (as as-of lineage)",
            check=below(25),
            command=cmd,
            client=loadgen.ASYNCIO_CLIENT,
        ),
        Row(
            "field impact depth 5 p95, ms",
            "ms",
            target="< 25",
            check=below(25),
            command=cmd,
            client=loadgen.ASYNCIO_CLIENT,
        ),
    ]


def measure(ctx: Context, out: list[Row], url: str, middle: dt.datetime, api: Service) -> None:
    """Times the column lineage of random datasets, now and as of `middle`."""
    current, as_of, impact = out[0], out[1], out[2] if len(out) > 2 else None
    s = ctx.sizes
    depth = s.lineage_depth
    with psycopg.connect(url) as conn:
        candidates = [r[0] for r in conn.execute(WITH_COLUMN_LINEAGE)]
    starts = random.Random(ctx.seed + 7).sample(candidates, min(len(candidates), s.lineage_queries))
    paths = [f"/api/v1/datasets/{d}/column-lineage?direction=both&depth={depth}" for d in starts]
    stamp = urllib.parse.quote(middle.isoformat())
    for row, variant in ((current, paths), (as_of, [p + f"&as_of={stamp}" for p in paths])):
        answers = loadgen.timed(api.base_url, variant)
        ok = loadgen.decoded(answers, Answer)
        later = sum(1 for st in answers.statuses if st == 404)  # first seen after as_of
        bad = len(variant) - len(ok) - later
        edges = sum(len(a.edges) for a in ok) / max(1, len(ok))
        row.note = (
            f"{len(variant)} datasets drawn at random (seed) from the {len(candidates):,} "
            f"with column lineage, {_timed(row, answers)}; {bad} answers "
            f"neither 200 nor 404; {edges:,.1f} field edges per 200 answer "
            f"({sum(a.truncated for a in ok)} truncated)"
            + (
                f"; as of {middle.isoformat()}, the middle of the log's event times ({later} "
                "404: the dataset was first seen later)."
                if row is as_of
                else "."
            )
        )
        row.measured_at = now()
    if impact is not None:
        _measure_impact(ctx, impact, url, api)


class Impact(msgspec.Struct):
    columns: list[msgspec.Raw]
    nodes: list[msgspec.Raw]
    truncated: bool = False


def _measure_impact(ctx: Context, row: Row, url: str, api: Service) -> None:
    """Times the field impact (depth 5, now) of random fields that have dependents."""
    with psycopg.connect(url) as conn:
        candidates = [(r[0], r[1]) for r in conn.execute(FIELDS_WITH_DEPENDENTS)]
    starts = random.Random(ctx.seed + 11).sample(
        candidates, min(len(candidates), ctx.sizes.lineage_queries)
    )
    paths = [
        "/api/v1/impact?depth=5&node=" + urllib.parse.quote(f"field:{d}:{f}") for d, f in starts
    ]
    answers = loadgen.timed(api.base_url, paths)
    ok = loadgen.decoded(answers, Impact)
    drawn = f"{len(paths)} fields drawn at random (seed) from the {len(candidates):,}"
    answered = max(1, len(ok))
    row.note = "; ".join(
        [
            f"{drawn} that some column lineage derives from, {_timed(row, answers)}",
            f"{len(paths) - len(ok)} answers not 200",
            f"per answer {sum(len(a.columns) for a in ok) / answered:,.1f} field edges",
            f"{sum(len(a.nodes) for a in ok) / answered:,.1f} datasets (owners, freshness)",
            f"{sum(a.truncated for a in ok)} truncated.",
        ]
    )
    row.measured_at = now()


def _timed(row: Row, answers: loadgen.Answers) -> str:
    """Sets the row's p95; how it was timed, for its note."""
    row.value = loadgen.percentile(answers.latencies_ms, 95)
    p50 = loadgen.percentile(answers.latencies_ms, 50)
    return f"one request at a time after 10 warm-up requests; p50 {p50:.2f} ms"
