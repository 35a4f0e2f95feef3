"""List totals (issue 46): each count statement of /jobs, `/jobs?late=true` and /datasets as
fad5d29 built it against this checkout's, on one store, in turns; then, with `--other`, the
lists end to end from both trees' `metastore api` in turns.

    python -m bench.scenario list-totals --url URL [--other fad5d29] [--rounds 10]

`--url`: a folded store (a copy of `python -m bench.run --only log`'s 1,000,000-event
store; it must have job namespaces `spark-prod`, as the benchmark's workload has). Each
count runs `--repeat` times a round, median and p95 printed per side; /datasets' before
side is this checkout's statement with the `datasets_live` index dropped (in a transaction
rolled back). The counts must agree. The HTTP part times bench/fig_reads.py's and
fig_health.py's mix (first pages, by namespace, next pages; the late list) on one
keep-alive connection per side; the datasets index is there for both sides (the other
tree's statement is the same).
"""

from __future__ import annotations

import statistics
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg

from bench import loadgen
from bench.ab import other_tree, turns
from bench.fig_reads import next_page
from bench.harness import metastore
from bench.scenario import parser
from metastore.access import EVERYTHING
from metastore.api import datasets, jobs

NAMESPACE = "spark-prod"
# fad5d29's count statements (the runs join made index-only impossible; the late filter
# was a probe per job, planned as a hash join of every job with every cadence)
OLD_JOBS = """SELECT count(*) FROM (SELECT 1 FROM readmodel.jobs j
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE true {filters} LIMIT 10001) counted"""
LATE = (
    "AND EXISTS (SELECT 1 FROM readmodel.job_cadence k"
    " WHERE k.job_id = j.id AND k.late_at <= now())"
)
BY_NAMESPACE = "AND j.namespace = %(namespace)s"
OLD = {
    "jobs": OLD_JOBS.format(filters=""),
    "jobs by namespace": OLD_JOBS.format(filters=BY_NAMESPACE),
    "late": OLD_JOBS.format(filters=LATE),
    "late by namespace": OLD_JOBS.format(filters=f"{BY_NAMESPACE} {LATE}"),
}
QUERIES = {
    "jobs": jobs.ListQuery(),
    "jobs by namespace": jobs.ListQuery(namespace=NAMESPACE),
    "late": jobs.ListQuery(late=True),
    "late by namespace": jobs.ListQuery(late=True, namespace=NAMESPACE),
}
DROP = "DROP INDEX readmodel.datasets_live"


def _ms(conn: psycopg.Connection[Any], sql: str, args: dict[str, Any]) -> tuple[float, int]:
    started = time.perf_counter()
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return (time.perf_counter() - started) * 1000, row[0]


def _line(what: str, before: list[float], after: list[float]) -> str:
    def p(v: list[float], q: int) -> float:
        return sorted(v)[min(len(v) - 1, round(q / 100 * (len(v) - 1)))]

    return (
        f"{what}: before p50 {statistics.median(before):.2f} p95 {p(before, 95):.2f} ms, "
        f"after p50 {statistics.median(after):.2f} p95 {p(after, 95):.2f} ms"
    )


def counts(url: str, rounds: int, repeat: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for what, query in QUERIES.items():
            planned = jobs.JOBS[False].plan(query, EVERYTHING)
            sides: dict[str, tuple[str, list[float]]] = {
                "before": (OLD[what], []),
                "after": (planned.count, []),
            }
            found = set()
            for _, side in turns(list(sides), rounds):
                sql, times = sides[side]
                for _ in range(repeat):
                    ms, n = _ms(conn, sql, planned.args)
                    times.append(ms)
                    found.add(n)
            assert len(found) == 1, (what, found)
            print(_line(what, sides["before"][1], sides["after"][1]))
        planned = datasets.DATASETS.plan(datasets.ListQuery(), EVERYTHING)
        by_side: dict[str, list[float]] = {"before": [], "after": []}
        for _, side in turns(list(by_side), rounds):
            with conn.transaction(force_rollback=side == "before"):
                if side == "before":
                    conn.execute(DROP)
                by_side[side] += [_ms(conn, planned.count, planned.args)[0] for _ in range(repeat)]
        print(_line("datasets", by_side["before"], by_side["after"]))


def mix() -> dict[str, list[str]]:
    q = urllib.parse.urlencode
    ns = ("spark-prod", "airflow-prod")
    dataset_ns = ("s3a://warehouse", "bigquery", "hdfs://namenode:8020")
    return {
        "list jobs": ["/api/v1/jobs", *(f"/api/v1/jobs?{q({'namespace': n})}" for n in ns)],
        "list datasets": [
            "/api/v1/datasets",
            *(f"/api/v1/datasets?{q({'namespace': n})}" for n in dataset_ns),
        ],
        "late jobs list": [
            "/api/v1/jobs?late=true",
            *(f"/api/v1/jobs?{q({'late': 'true', 'namespace': n})}" for n in ns),
        ],
    }


def http(url: str, other: str, rounds: int, repeat: int) -> None:
    paths = mix()
    result: dict[str, dict[str, list[float]]] = {name: {} for name in paths}
    with other_tree(other) as sides, tempfile.TemporaryDirectory() as log_dir:
        for _, (side, tree) in turns(sides, rounds):
            with metastore("api", url, Path(log_dir), cwd=tree) as api:
                session = loadgen.Session(api.base_url)
                try:
                    for name, firsts in paths.items():
                        times = result[name].setdefault(side, [])
                        for first in firsts:  # (warm-up)
                            session.get(first)
                        for _ in range(repeat):
                            for first in firsts:
                                ms, status, body = session.get(first)
                                assert status == 200, (first, status, body[:300])
                                times.append(ms)
                                if (after := next_page(session, first, body)) is not None:
                                    times.append(after)
                finally:
                    session.close()
    for name, by_side in result.items():
        print(_line(f"{name} (HTTP, other = before)", by_side["other"], by_side["this"]))


def main(argv: list[str]) -> int:
    cli = parser("list-totals", __doc__, rounds=10)
    cli.add_argument("--url", required=True, help="a folded store (see above)")
    cli.add_argument("--repeat", type=int, default=3, help="runs of each statement a round")
    args = cli.parse_args(argv)
    counts(args.url, args.rounds, args.repeat)
    if args.other:
        http(args.url, args.other, args.rounds, args.repeat)
    return 0
