"""A read's planner settings (metastore/api/planner.py) end with the read: on the API's
pool, the same connection's next statement, in the same request or the next one, plans
with every method on again, however the read turned its methods off."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
from psycopg import AsyncConnection

from metastore.api import planner, search
from metastore.api.planner import Planner
from metastore.config import load_settings
from metastore.db import create_pool

OFF = Planner(("enable_seqscan",))
# Every row of a table with a primary key: a sequential scan, unless they are turned off.
READ = "SELECT * FROM planned WHERE id > 0"


async def _pipelined(conn: AsyncConnection[Any]) -> None:
    await planner.rows_planned(conn, OFF, READ)


async def _walk(conn: AsyncConnection[Any]) -> None:
    # (column lineage: the walk leaves them off for its levels, its answer's read restores)
    await planner.pipelined(conn, [(READ, None)], off=OFF, restore=False)
    await planner.pipelined(conn, [(READ, None)])
    await planner.pipelined(conn, [(READ, None)], on=OFF)


async def _block(conn: AsyncConnection[Any]) -> None:
    async with planner.turned_off(conn, OFF):
        await conn.execute(READ)


async def _search(conn: AsyncConnection[Any]) -> None:
    await search._read(conn, "trigram", [READ], {})


async def _plan(conn: AsyncConnection[Any]) -> str:
    cur = await conn.execute("EXPLAIN (FORMAT JSON) " + READ)
    found = await cur.fetchone()
    assert found is not None
    return str(found[0][0]["Plan"]["Node Type"])


@pytest.mark.parametrize("read", [_pipelined, _walk, _block, _search])
def test_a_reads_planner_settings_end_with_it(
    database_url: str, read: Callable[[AsyncConnection[Any]], Awaitable[None]]
) -> None:
    with psycopg.connect(database_url, autocommit=True) as setup:
        setup.execute("CREATE TABLE planned (id int PRIMARY KEY, v text)")
        setup.execute("INSERT INTO planned SELECT i, 'v' FROM generate_series(1, 10000) i")
        setup.execute("ANALYZE planned")
    settings = load_settings({"METASTORE_DATABASE_URL": database_url})

    async def scenario() -> tuple[str, str, str, str]:
        pool = create_pool(settings, min_size=1, max_size=1, name="test")
        await pool.open(wait=True)
        try:
            async with pool.connection() as conn:
                before = await _plan(conn)
                await planner.turn_off(conn, OFF)
                during = await _plan(conn)  # (what the read plans with)
                await planner.turn_on(conn, OFF)
                await read(conn)
                after = await _plan(conn)
            async with pool.connection() as conn:  # (the pool's one connection again)
                next_user = await _plan(conn)
            return before, during, after, next_user
        finally:
            await pool.close()

    before, during, after, next_user = asyncio.run(scenario())
    assert before == "Seq Scan" and during != "Seq Scan"
    assert after == "Seq Scan"
    assert next_user == "Seq Scan"
