"""Times a namespace's dataset count, a /datasets?namespace= total and its first page, the
read before issue 48 (a dataset counted in its one home namespace) against this checkout's
(in every namespace it has a name in), on a store of many names.

    .venv/bin/python scripts/time_namespace_counts.py [--datasets 200000]

Writes `--datasets` datasets with a Spark and a Hive name each straight into the read models
(bench/search_store.py, which also fills the home columns the old read used) of a throwaway
PostgreSQL, adds the old read's index, and prints the median of 7 runs of each statement.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import search_store  # noqa: E402
from metastore.api import datasets, namespaces  # noqa: E402
from metastore.api.pagination import count_capped  # noqa: E402
from metastore.embedded_pg import EmbeddedPostgres  # noqa: E402
from metastore.migrations import apply_migrations  # noqa: E402
from projections.schema import create_readmodel_tables  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", type=int, default=200_000)
    args = parser.parse_args()
    pg = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="time-ns-", dir="/tmp")), fast_unsafe=True)
    url = pg.start()
    try:
        apply_migrations(url)
        with psycopg.connect(url, autocommit=True) as conn:
            create_readmodel_tables(conn)
            search_store.seed(conn, args.datasets, 1_000)
            conn.execute(OLD_INDEX)
            conn.execute("VACUUM ANALYZE")
            for namespace in (search_store.SPARK_NAMESPACE, search_store.HIVE_NAMESPACE):
                for what, old in OLD.items():
                    params = {"namespace": namespace}
                    before = median_ms(conn, old, params)
                    after = median_ms(conn, NEW[what], params)
                    print(f"{namespace} {what}: before {before:.1f} ms, after {after:.1f} ms")
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
