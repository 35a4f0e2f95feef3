"""What the pools' check before each checkout costs (docs/PERFORMANCE.md).

    python -m bench.pool_check [--checkouts 4000] [--rounds 5]

Times a checkout and a `SELECT 1` from a one-connection pool on a throwaway PostgreSQL,
for each `check`: none, metastore's (a zero-timeout poll of the socket, the empty query
only for a connection with something to read: metastore/db.py, drop_if_closed) and
psycopg_pool's own `check_connection` (an empty query, a round trip, every time). The
variants run in turns, for `rounds` rounds; prints the median microseconds per checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from typing import Any

from psycopg_pool import AsyncConnectionPool

from bench.harness import cluster
from metastore.db import drop_if_closed

VARIANTS: dict[str, Any] = {
    "no check": None,
    "drop_if_closed (metastore)": drop_if_closed,
    "check_connection (psycopg_pool)": AsyncConnectionPool.check_connection,
}


async def _measure(url: str, check: Any, checkouts: int) -> float:
    async with AsyncConnectionPool(
        url, min_size=1, max_size=1, check=check, kwargs={"autocommit": True}
    ) as pool:
        await pool.wait()
        started = time.perf_counter()
        for _ in range(checkouts):
            async with pool.connection() as conn:
                await conn.execute("SELECT 1")
        return (time.perf_counter() - started) / checkouts * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--checkouts", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    results: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with cluster("pool-check") as pg:
        url = pg.url
        for _ in range(args.rounds):
            for name, check in VARIANTS.items():
                results[name].append(asyncio.run(_measure(url, check, args.checkouts)))
    print(f"{'check':<34}{'µs per checkout + SELECT 1':>28}")
    for name, runs in results.items():
        print(f"{name:<34}{statistics.median(runs):>28.1f}")
    print(f"(medians of {args.rounds} rounds of {args.checkouts:,} checkouts)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
