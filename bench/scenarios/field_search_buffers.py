"""The buffers and statements of a search by field, statement by statement summed, for the
field words of bench/search_store.py on a throwaway store of its datasets and fields.

    python -m bench.scenario field-search-buffers [--datasets 100000]

Each statement metastore/api/search_fields.py plans for a field word is run under EXPLAIN
(ANALYZE, BUFFERS) and then for its rows; buffers are shared hits and reads. Buffers, not
times, so the figure holds on a shared machine. To compare two trees, run it in each
checkout on the same `--datasets`. Formerly scripts/field_search_buffers.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from bench import search_store
from bench.harness import cluster
from bench.scenario import parser
from metastore.api import search, search_fields
from metastore.api.planner import turned_off
from metastore.api.sqlparts import like_prefix, like_substring
from metastore.migrations import apply_migrations
from projections.schema import create_readmodel_tables


async def measure(url: str, words: list[str]) -> None:
    conn = await psycopg.AsyncConnection.connect(url)
    total = {"buffers": 0, "statements": 0}
    for q in words:
        args: dict[str, Any] = {
            "exact": q.lower(),
            "prefix": like_prefix(q),
            "pattern": like_substring(q),
            "limit": 51,
            "namespace": None,
        }
        total.update(buffers=0, statements=0)

        async def read(plan: str, parts: list[str], a: Any) -> list[Any]:
            statement = "\n UNION ALL".join(f"({p})" for p in parts)
            async with turned_off(conn, search.PLANS[plan]):
                cur = await conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, a)
                row = await cur.fetchone()
                assert row is not None
                node = row[0][0]["Plan"]
                total["buffers"] += node["Shared Hit Blocks"] + node["Shared Read Blocks"]
                total["statements"] += 1
                cur = await conn.execute(statement, a)
                return await cur.fetchall()

        await search_fields.field_hits(read, False, q, False, None, args, names_fill_page=False)
        print(f"{q}: {total['buffers']:,} buffers in {total['statements']} statements")
    await conn.close()


def main(argv: list[str]) -> int:
    cli = parser("field-search-buffers", __doc__, other=False, rounds=None)
    cli.add_argument("--datasets", type=int, default=100_000)
    args = cli.parse_args(argv)
    with cluster("field-buffers", warm=False, durable=False) as pg:
        url = pg.database()
        apply_migrations(url)
        with psycopg.connect(url, autocommit=True) as conn:
            create_readmodel_tables(conn)
            search_store.seed(conn, args.datasets, args.datasets // 2, 4)
        print(f"{args.datasets:,} datasets, {4 * args.datasets:,} fields", flush=True)
        asyncio.run(measure(url, search_store.FIELD_WORDS))
    return 0
