"""Prints the impact and diff answers for the brief's example after a failed Trino run.

    .venv/bin/python scripts/failed_run_example.py

The seed (scenarios/seed_spark_trino), a dbt model reading the Trino summary, then the next
day's Trino query FAILing on it (tests/support.py, failed_trino_events), folded with the
catalog map that joins the Trino names to their Hive names, into a throwaway PostgreSQL;
then a real `metastore api` answers `GET /api/v1/impact?node=run:<failed run>` and
`GET /api/v1/lineage/diff` around the summary between the day before and the day after.
tests/test_failed_runs.py checks the same answers. Not a measurement (so not a scenario
of bench/): it prints what docs quote, on the bench harness's store and server.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import cluster, metastore
from metastore.catalogs import parse_catalog_map
from metastore.migrations import apply_migrations
from projections.runner import catch_up
from projections.schema import create_readmodel_tables
from tests.logdata import append
from tests.support import BRIEF_CATALOGS, FAILED_TRINO_RUN, TRINO, failed_trino_events

SUMMARY = {"namespace": TRINO, "name": "lakehouse.sales.orders_summary"}
MOMENTS = {"from": "2026-09-02T12:00:00Z", "to": "2026-09-04T00:00:00Z"}


def main() -> int:
    catalogs = parse_catalog_map(BRIEF_CATALOGS, "catalogs.yaml")
    with (
        cluster("example", warm=False, durable=False) as pg,
        tempfile.TemporaryDirectory(prefix="metastore-example-") as logs,
    ):
        apply_migrations(pg.url)  # (the read models with the map: not Cluster.database's)
        with psycopg.connect(pg.url, autocommit=True) as conn:
            create_readmodel_tables(conn, catalogs)
            append(conn, failed_trino_events())
            catch_up(conn, catalogs=catalogs)
        with (
            metastore("api", pg.url, Path(logs)) as api,
            httpx.Client(base_url=api.base_url + "/api/v1", timeout=30) as client,
        ):
            (summary,) = client.get("/datasets", params=SUMMARY).json()["items"]
            node = f"dataset:{summary['id']}"
            asked = {
                f"/impact?node=run:{FAILED_TRINO_RUN}": {"node": f"run:{FAILED_TRINO_RUN}"},
                f"/lineage/diff?node={node}&from={MOMENTS['from']}&to={MOMENTS['to']}": {
                    "node": node,
                    **MOMENTS,
                },
            }
            for title, params in asked.items():
                answer = client.get(title.split("?", 1)[0], params=params)
                print(f"## GET /api/v1{title} ({answer.status_code})\n")
                print(json.dumps(answer.json(), indent=2))
                print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
