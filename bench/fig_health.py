"""Run statistics and lateness p95 with the whole log folded (issue 45 items 1 and 2):
a namespace's statistics, a job's statistics over 30 days, the late jobs, and a dataset's
page (its `next_write` from its writers' cadences).

Each endpoint gets the same number of requests, one at a time on one keep-alive
connection, over the job namespaces and a sample of jobs (half of them as of a moment in
the middle of the log).
"""

from __future__ import annotations

import datetime as dt
import random
import urllib.parse

import psycopg

from bench import loadgen
from bench.context import Context, p95_figures
from bench.harness import Service
from bench.report import Row, now

GROUP = "log"
FIGURES = (
    "namespace run statistics",
    "job run statistics",
    "late jobs list",
    "dataset page with next write",
)


rows = p95_figures(GROUP, FIGURES, 25)


def _q(path: str, **params: str) -> str:
    return path + "?" + urllib.parse.urlencode(params) if params else path


def measure(ctx: Context, out: list[Row], url: str, api: Service, middle: dt.datetime) -> None:
    n = ctx.sizes.read_queries
    rng = random.Random(ctx.seed + 45)
    with psycopg.connect(url) as conn:
        namespaces = [
            r[0] for r in conn.execute("SELECT DISTINCT namespace FROM readmodel.jobs ORDER BY 1")
        ]
        job_ids = [
            str(r[0]) for r in conn.execute("SELECT id FROM readmodel.jobs ORDER BY id LIMIT 5000")
        ]
        jobs_per_namespace = conn.execute(
            "SELECT max(c) FROM (SELECT count(*) c FROM readmodel.jobs GROUP BY namespace) x"
        ).fetchone()
        learned = conn.execute("SELECT count(*) FROM readmodel.job_cadence").fetchone()
        # datasets with a writer that has a learned cadence (a next write to find)
        written = [
            str(r[0])
            for r in conn.execute(
                "SELECT DISTINCT n.dataset_id FROM readmodel.job_cadence k"
                " JOIN readmodel.job_edges e ON e.job_id = k.job_id AND e.direction = 'output'"
                " JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name"
                " LIMIT 5000"
            )
        ] or [str(r[0]) for r in conn.execute("SELECT id FROM readmodel.datasets LIMIT 5000")]
    assert jobs_per_namespace is not None and learned is not None
    as_of = middle.isoformat().replace("+00:00", "Z")

    def namespace_stats(i: int) -> str:
        namespace = namespaces[i % len(namespaces)]
        if i % 2:
            return _q("/api/v1/namespace-stats", namespace=namespace, as_of=as_of)
        return _q("/api/v1/namespace-stats", namespace=namespace)

    def job_stats(i: int) -> str:
        path = f"/api/v1/jobs/{rng.choice(job_ids)}/stats"
        return _q(path, as_of=as_of) if i % 2 else path

    def late_jobs(i: int) -> str:
        if i % 2:
            return _q("/api/v1/jobs", late="true", namespace=namespaces[i % len(namespaces)])
        return _q("/api/v1/jobs", late="true")

    def dataset_page(i: int) -> str:
        path = f"/api/v1/datasets/{rng.choice(written)}"
        return _q(path, as_of=as_of) if i % 2 else path

    makers = (namespace_stats, job_stats, late_jobs, dataset_page)
    for row, make in zip(out, makers, strict=True):
        loadgen.get_many(api.base_url, [make(i) for i in range(5)])  # warm-up
        answers = loadgen.get_many(api.base_url, [make(i) for i in range(n)])
        bad = sum(1 for s in answers.statuses if s != 200)
        row.value = loadgen.percentile(answers.latencies_ms, 95)
        row.note = (
            f"{n} requests (half as of the log's middle: {as_of}), {bad} not 200, p50 "
            f"{loadgen.percentile(answers.latencies_ms, 50):.2f} ms; {len(namespaces)} job "
            f"namespaces of up to {jobs_per_namespace[0]:,} jobs, {learned[0]:,} jobs with a "
            "learned cadence."
        )
        row.measured_at = now()
