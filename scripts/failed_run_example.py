"""Prints the impact and diff answers for the brief's example after a failed Trino run.

    .venv/bin/python scripts/failed_run_example.py

The seed (scenarios/seed_spark_trino), a dbt model reading the Trino summary, then the next
day's Trino query FAILing on it (tests/support.py, failed_trino_events), folded with the
catalog map that joins the Trino names to their Hive names, into a throwaway PostgreSQL;
then a real `metastore api` answers `GET /api/v1/impact?node=run:<failed run>` and
`GET /api/v1/lineage/diff` around the summary between the day before and the day after.
tests/test_failed_runs.py checks the same answers.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from metastore.catalogs import parse_catalog_map  # noqa: E402
from metastore.embedded_pg import EmbeddedPostgres  # noqa: E402
from metastore.migrations import apply_migrations  # noqa: E402
from projections.runner import catch_up  # noqa: E402
from projections.schema import create_readmodel_tables  # noqa: E402
from tests.logdata import append  # noqa: E402
from tests.support import (  # noqa: E402
    BRIEF_CATALOGS,
    FAILED_TRINO_RUN,
    TRINO,
    failed_trino_events,
    running,
)


def main() -> None:
    catalogs = parse_catalog_map(BRIEF_CATALOGS, "catalogs.yaml")
    with tempfile.TemporaryDirectory(prefix="metastore-example-") as tmp:
        # (a data directory of its own: mkdtemp's, which the postgres user can enter when
        # we are root, where TemporaryDirectory's parent it could not)
        pg = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="metastore-example-")), fast_unsafe=True)
        try:
            url = pg.start()
            apply_migrations(url)
            with psycopg.connect(url, autocommit=True) as conn:
                create_readmodel_tables(conn, catalogs)
                append(conn, failed_trino_events())
                catch_up(conn, catalogs=catalogs)
            with (
                running("api", url, Path(tmp)) as api,
                httpx.Client(base_url=api.base_url + "/api/v1", timeout=30) as client,
            ):
                lookup = {"namespace": TRINO, "name": "lakehouse.sales.orders_summary"}
                (summary,) = client.get("/datasets", params=lookup).json()["items"]
                impact = client.get("/impact", params={"node": f"run:{FAILED_TRINO_RUN}"})
                diff = client.get(
                    "/lineage/diff",
                    params={
                        "node": f"dataset:{summary['id']}",
                        "from": "2026-09-02T12:00:00Z",
                        "to": "2026-09-04T00:00:00Z",
                    },
                )
                for title, answer in (
                    (f"GET /api/v1/impact?node=run:{FAILED_TRINO_RUN}", impact),
                    (
                        f"GET /api/v1/lineage/diff?node=dataset:{summary['id']}"
                        "&from=2026-09-02T12:00:00Z&to=2026-09-04T00:00:00Z",
                        diff,
                    ),
                ):
                    print(f"## {title} ({answer.status_code})\n")
                    print(json.dumps(answer.json(), indent=2))
                    print()
        finally:
            pg.destroy()


if __name__ == "__main__":
    main()
