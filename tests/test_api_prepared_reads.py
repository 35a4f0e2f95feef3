"""A read answered with a problem (a 404, a 400) leaves the API's connection as a 200 does.

psycopg prepares a statement the fifth time a connection runs it, and PostgreSQL then plans
it no more; a ROLLBACK makes psycopg forget every statement it has prepared. A read that
ended in a 404 was rolled back by the pool, so the reads after it on that connection were
planned again, every statement, five times each (a dataset's page as of T: 20 ms, 6 once
prepared; docs/PERFORMANCE.md, "Reads planned again after every 404").
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from projections.runner import catch_up
from tests.logdata import append
from tests.support import all_scenario_events, running

# The executions of a dataset page's statement as of T (datasets.GET_DATASETS_AS_OF) in the
# server's statement log: `<unnamed>` planned for this execution, `_pg3_N` prepared.
DATASET_AS_OF = re.compile(
    r"execute (<unnamed>|_pg3_\d+): \s*SELECT d\.id, coalesce\(dn\.namespace"
)


def test_a_404_does_not_make_the_next_reads_plan_again(
    pg_server: Any, template_db: str, tmp_path: Path
) -> None:
    if pg_server.embedded is None:
        pytest.skip("reads the server's statement log: the tests' own server only")
    log = pg_server.embedded.logfile
    with pg_server.database("prepared", template_db) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            append(conn, all_scenario_events())
            catch_up(conn)
            dataset, first_seen, last_seen = conn.execute(
                "SELECT id, first_seen, last_seen FROM readmodel.datasets"
                " WHERE merged_into IS NULL ORDER BY id LIMIT 1"
            ).fetchone() or (None, None, None)
            assert dataset is not None
            dbname = conn.info.dbname
            # (this database's sessions alone log their statements)
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET log_statement = 'all'").format(
                    sql.Identifier(dbname)
                )
            )
        env = {"METASTORE_POOL_SIZE": "1"}  # (every read on the one connection)
        with (
            running("api", url, tmp_path, env=env) as api,
            httpx.Client(base_url=api.base_url, timeout=30) as client,
        ):
            page = f"/api/v1/datasets/{dataset}?as_of="

            def read(when: Any) -> int:
                return client.get(page + urllib.parse.quote(when.isoformat())).status_code

            logged = log.stat().st_size
            assert [read(last_seen) for _ in range(8)] == [200] * 8  # (prepared by now)
            assert read(first_seen.replace(year=first_seen.year - 1)) == 404  # not seen yet
            assert [read(last_seen) for _ in range(5)] == [200] * 5
            with log.open("rb") as text:
                text.seek(logged)
                executions = DATASET_AS_OF.findall(text.read().decode(errors="replace"))
    assert len(executions) == 14, executions
    # prepared at its sixth execution; the 404's own read and the five after it as well
    assert executions[:5] == ["<unnamed>"] * 5, executions
    assert "<unnamed>" not in executions[5:], executions
