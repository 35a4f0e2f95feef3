"""A namespace's dataset count, a /datasets?namespace= total and its first page: the read
before issue 48 (a dataset counted in its one home namespace) against this checkout's (in
every namespace it has a name in), on a store of many names.

    python -m bench.scenario namespace-counts [--datasets 200000]

Writes `--datasets` datasets with a Spark and a Hive name each straight into the read
models (bench/search_store.py, which also fills the home columns the old read used) of a
throwaway PostgreSQL, adds the old read's index, and prints the median of 7 runs of each
statement. Formerly scripts/time_namespace_counts.py.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from bench import search_store
from bench.harness import cluster
from bench.scenario import parser
from metastore.api import datasets, namespaces
from metastore.api.pagination import count_capped

OLD_INDEX = (
    "CREATE INDEX datasets_home ON readmodel.datasets (home_namespace, home_name)"
    " WHERE merged_into IS NULL"
)
OLD_WALK = """
FROM readmodel.datasets d
WHERE d.merged_into IS NULL AND d.home_namespace = %(namespace)s"""
OLD = {
    "namespace count": "SELECT count(*) FROM readmodel.datasets d"
    " WHERE d.home_namespace = %(namespace)s AND d.merged_into IS NULL",
    "list total": count_capped("SELECT 1" + OLD_WALK),
    "list page": f"SELECT d.id {OLD_WALK} ORDER BY d.home_namespace, d.home_name LIMIT 51",
}
# this checkout's: the count is /namespaces' subquery for one namespace
NEW = {
    "namespace count": "SELECT " + namespaces.DATASET_COUNT.format(ns="%(namespace)s"),
    "list total": datasets.COUNT_IN_NAMESPACE,
    "list page": f"SELECT d.id {datasets.NAMESPACE_WALK.format(filters='')} "
    "ORDER BY n.namespace, n.name LIMIT 51",
}


def median_ms(conn: psycopg.Connection[Any], sql: str, args: dict[str, Any]) -> float:
    times = []
    for _ in range(7):
        started = time.perf_counter()
        conn.execute(sql, args).fetchall()
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)[3]


def main(argv: list[str]) -> int:
    cli = parser("namespace-counts", __doc__, other=False)
    cli.add_argument("--datasets", type=int, default=200_000)
    args = cli.parse_args(argv)
    with (
        cluster("namespace-counts", warm=False, durable=False) as pg,
        psycopg.connect(pg.database(), autocommit=True) as conn,
    ):
        search_store.seed(conn, args.datasets, 1_000)
        conn.execute(OLD_INDEX)
        conn.execute("VACUUM ANALYZE")
        for namespace in (search_store.SPARK_NAMESPACE, search_store.HIVE_NAMESPACE):
            for what, old in OLD.items():
                params = {"namespace": namespace}
                before = median_ms(conn, old, params)
                after = median_ms(conn, NEW[what], params)
                print(f"{namespace} {what}: before {before:.1f} ms, after {after:.1f} ms")
    return 0
