"""The buffers and statements of a search by field, statement by statement summed, for the
field words of bench/search_store.py on a throwaway store of its datasets and fields.

    .venv/bin/python scripts/field_search_buffers.py [--datasets 100000] [--src DIR]

`--src`: the source tree whose api/search_fields.py plans the reads (a checkout of an
earlier commit, for before and after on the same store: 354cb85's parent against it).
Each statement is run under EXPLAIN (ANALYZE, BUFFERS) and then for its rows; buffers are
shared hits and reads.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


async def measure(url: str, words: list[str]) -> None:
    import psycopg

    from metastore.api import search, search_fields
    from metastore.api.sqlparts import like_prefix, like_substring

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
            await conn.execute(search.PLANS[plan])
            statement = "\n UNION ALL".join(f"({p})" for p in parts)
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", type=int, default=100_000)
    parser.add_argument("--src", type=Path, default=ROOT)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench import search_store  # (this tree's store, whichever tree plans the reads)

    sys.path.insert(0, str(args.src.resolve()))
    import psycopg

    from metastore.embedded_pg import EmbeddedPostgres
    from metastore.migrations import apply_migrations
    from projections.schema import create_readmodel_tables

    pg = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="field-buffers-")), fast_unsafe=True)
    url = pg.start()
    try:
        apply_migrations(url)
        with psycopg.connect(url, autocommit=True) as conn:
            create_readmodel_tables(conn)
            search_store.seed(conn, args.datasets, args.datasets // 2, 4)
        print(f"{args.datasets:,} datasets, {4 * args.datasets:,} fields", flush=True)
        asyncio.run(measure(url, search_store.FIELD_WORDS))
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
