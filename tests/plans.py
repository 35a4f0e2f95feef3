"""A statement's generic plan, as a folding connection keeps it once psycopg has prepared it
(projections.common.planner_without's `plan_once`): planned once for any parameters, with
the statistics the tables have now."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import psycopg

from projections.common import planner_without

Conn = psycopg.Connection[Any]

_PLACEHOLDER = re.compile(r"%\((\w+)\)[sb]|%[sb]")


def numbered(query: str) -> tuple[str, list[str | int]]:
    """`query` with $1, $2, ... for psycopg's placeholders, and the parameter each stands
    for (a name, or the position of an unnamed one); a name used twice is one parameter."""
    keys: list[str | int] = []
    unnamed = iter(range(len(query)))

    def number(match: re.Match[str]) -> str:
        key: str | int = match.group(1) or next(unnamed)
        if key not in keys:
            keys.append(key)
        return f"${keys.index(key) + 1}"

    return _PLACEHOLDER.sub(number, query), keys


@contextlib.contextmanager
def planned_once(
    conn: Conn, query: str, *methods: str, search_path: str | None = None
) -> Iterator[list[str | int]]:
    """`query` prepared as `planned_once` in a transaction with `methods` off and its
    generic plan kept, as the fold prepares it; yields the parameters it takes (`numbered`),
    deallocated after."""
    text, keys = numbered(query)
    with conn.transaction(), planner_without(conn, *methods, plan_once=True):
        if search_path:
            conn.execute(f"SET LOCAL search_path TO {search_path}")
        conn.execute("PREPARE planned_once AS " + text)
        try:
            yield keys
        finally:
            conn.execute("DEALLOCATE planned_once")


def generic_plan(conn: Conn, query: str, *methods: str) -> str:
    """The generic plan of `query` (EXPLAIN, costs off) with `methods` off, in the read
    models' schema. Its parameters are NULL: a generic plan is the same for any values."""
    with planned_once(conn, query, *methods, search_path="readmodel, public") as keys:
        nulls = ", ".join("NULL" for _ in keys)
        explained = conn.execute(f"EXPLAIN (COSTS OFF) EXECUTE planned_once({nulls})")
        return "\n".join(line for (line,) in explained)
