"""Keyset pagination: the cursor is the sort key of the last item, base64url-encoded.

Pages are read `WHERE key > last ORDER BY key LIMIT n+1`, never with OFFSET, so items
written meanwhile neither shift a page nor repeat one. The cursor names the list it
belongs to and the filters and sort it was made for (`bound_kind`), so a cursor of one
list, or of the same list filtered or sorted otherwise, is refused (400, not a wrong page).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec
from psycopg import AsyncConnection

from metastore.api.db import row
from metastore.problems import InvalidParam, ProblemError

T = TypeVar("T")


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def bound_kind(kind: str, query: msgspec.Struct, *extra: Any) -> str:
    """The list name a cursor carries: `kind` and a hash of the query's parameters (all
    but `cursor` and `limit`) and of `extra` (a path parameter)."""
    values = {
        name: _plain(getattr(query, name))
        for name in query.__struct_fields__
        if name not in ("cursor", "limit")
    }
    raw = msgspec.json.encode([values, [_plain(v) for v in extra]], order="sorted")
    return f"{kind}.{hashlib.blake2b(raw, digest_size=6).hexdigest()}"


def encode_cursor(kind: str, key: Sequence[Any]) -> str:
    raw = msgspec.json.encode([kind, *(_plain(v) for v in key)])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, kind: str, types: Sequence[type]) -> tuple[Any, ...]:
    """The key a cursor of list `kind` carries, converted to `types`; 400 otherwise."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = msgspec.json.decode(raw)
        if not isinstance(parts, list) or len(parts) != len(types) + 1 or parts[0] != kind:
            raise ValueError("wrong shape")
        key: tuple[Any, ...] = tuple(
            msgspec.convert(p, t) for p, t in zip(parts[1:], types, strict=True)
        )
    except (ValueError, binascii.Error, msgspec.MsgspecError, TypeError):
        reason = "not a cursor handed out by this list with these filters and sort"
        raise ProblemError(
            400,
            f"query parameter `cursor` is invalid: {reason}",
            invalid_params=[InvalidParam(name="cursor", reason=reason)],
            kind="invalid-cursor",
        ) from None
    for value in key:
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise ProblemError(400, "query parameter `cursor` is invalid: out of range")
        if isinstance(value, str) and "\x00" in value:
            raise ProblemError(400, "query parameter `cursor` is invalid: NUL character")
    return key


def page(
    rows: list[T], limit: int, kind: str, key: Callable[[T], Sequence[Any]]
) -> tuple[list[T], str | None]:
    """Splits the `limit + 1` rows a query read into the page and the next cursor."""
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, encode_cursor(kind, key(rows[-1]))


# --- totals ---------------------------------------------------------------------------
# A list's total is counted up to TOTAL_CAP: exact below, "at least TOTAL_CAP" beyond, so a
# page never pays for counting a large list to the end.
TOTAL_CAP = 10_000


def count_capped(select: str) -> str:
    """A statement counting the rows of `select` (a list's FROM and WHERE, without its
    cursor, order and limit), stopping one past TOTAL_CAP."""
    return f"SELECT count(*) FROM ({select} LIMIT {TOTAL_CAP + 1}) counted"


async def total(
    conn: AsyncConnection[Any], count: str, args: Any, whole: Sequence[Any] | None
) -> tuple[int, bool]:
    """(total, total_is_exact) of a list: `whole` when the page holds the whole list (first
    page, no next one), else counted by `count` (a count_capped statement)."""
    if whole is not None:
        return len(whole), True
    (counted,) = await row(conn, count, args)
    return capped(counted)


def capped(counted: int) -> tuple[int, bool]:
    """(total, total_is_exact) of a count_capped statement's count."""
    return (TOTAL_CAP, False) if counted > TOTAL_CAP else (counted, True)


def page_of_bytes(
    rows: list[T], limit: int, kind: str, key: Callable[[T], Sequence[Any]], column: int
) -> tuple[list[T], str | None]:
    """`page` for rows whose query cut them at a byte budget: past it, a row comes with
    None in `column` (its stored JSON, left unsent), and the page ends before it."""
    fits = next((i for i, r in enumerate(rows) if r[column] is None), len(rows))  # type: ignore[index]
    return page(rows[: fits + 1], min(limit, fits), kind, key)
