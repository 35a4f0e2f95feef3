"""A read's planner settings: which of the planner's methods are off for its statements, set
and restored local to the request's transaction (SET LOCAL), so a connection's next user
plans as configured."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import msgspec
from psycopg import AsyncConnection
from psycopg.rows import tuple_row

Method = Literal[
    "enable_bitmapscan", "enable_gathermerge", "enable_indexscan", "enable_seqscan", "enable_sort"
]


class Planner(msgspec.Struct, frozen=True):
    """The planner's methods a read turns off (`enable_seqscan`, ...): each read's measured
    plan choice (docs/PERFORMANCE.md)."""

    off: tuple[Method, ...]

    def set(self, on: bool) -> str:
        """One statement turning the methods off (or back on), local to the transaction: a
        SELECT, so it pipelines with the read's statements."""
        value = "on" if on else "off"
        return "SELECT " + ", ".join(f"set_config('{m}', '{value}', true)" for m in self.off)


# Index probes whatever the statistics (column lineage's walk, a dataset's runs).
SEQSCAN = Planner(("enable_seqscan",))


async def turn_off(conn: AsyncConnection[Any], planner: Planner | None) -> None:
    if planner is not None:
        await conn.execute(planner.set(on=False))


async def turn_on(conn: AsyncConnection[Any], planner: Planner | None) -> None:
    if planner is not None:
        await conn.execute(planner.set(on=True))


@contextlib.asynccontextmanager
async def turned_off(conn: AsyncConnection[Any], planner: Planner | None) -> AsyncIterator[None]:
    """The block's statements with `planner`'s methods off, on again after it (a round trip
    each way: for a read whose statements depend on each other's rows)."""
    await turn_off(conn, planner)
    yield
    await turn_on(conn, planner)


async def pipelined(
    conn: AsyncConnection[Any],
    statements: Sequence[tuple[str, Any]],
    *,
    off: Planner | None = None,
    restore: bool = True,
    on: Planner | None = None,
) -> list[list[Any]]:
    """The rows of each of `statements` (none for one without rows: a DECLARE), in one round
    trip: `on`'s methods turned back on (an earlier read left them off) and `off`'s off before
    them, `off`'s on again after them unless not `restore` (a walk keeping them off for its
    next statements, a later read's `on` restoring them)."""
    async with contextlib.AsyncExitStack() as stack:
        cursors = [
            await stack.enter_async_context(conn.cursor(row_factory=tuple_row)) for _ in statements
        ]
        async with conn.pipeline():
            if on is not None:
                await conn.execute(on.set(on=True))
            if off is not None:
                await conn.execute(off.set(on=False))
            for cur, (query, params) in zip(cursors, statements, strict=True):
                await cur.execute(query, params)
            if off is not None and restore:
                await conn.execute(off.set(on=True))
        return [await cur.fetchall() if cur.description is not None else [] for cur in cursors]


async def rows_planned(
    conn: AsyncConnection[Any], planner: Planner | None, query: str, params: Any = None
) -> list[Any]:
    """The rows of `query` planned with `planner`'s methods off, in one round trip."""
    return (await pipelined(conn, [(query, params)], off=planner))[0]
