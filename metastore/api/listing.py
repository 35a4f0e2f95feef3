"""One way to serve a list: a resource declares its filters, sorts and total once;
`Listing.plan` checks the cursor and builds the statements (before a connection is
taken, as every bad parameter is refused), and `Planned.read` runs them, pages and totals;
`Listing.serve` does both for a list operation's handler.

A declaration names, per query parameter, the SQL fragment it adds (`Filter`), per `sort`
the order, the cursor's condition and key (`Sort`), the visibility fragment of a
restricted access (api/visibility.py), and the statements: a list statement formatted
with `{filters}` and `{order}`, and a count_capped statement formatted with `{filters}`
(the list's filters without the cursor). The query parameters themselves are validated
by the operation's query struct (api/operation.py: a 400 naming the parameter), the
cursor here (api/pagination.py: a 400 naming `cursor`). Adding a filter is one `Filter`;
adding a list, one `Listing` and the handler that turns the rows `serve` reads into items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection
from starlette.requests import Request

from metastore.access import Access, access_of
from metastore.api import planner
from metastore.api.db import connection, row, rows
from metastore.api.operation import Operation
from metastore.api.pagination import bound_kind, capped, decode_cursor, page, total
from metastore.api.planner import Planner
from metastore.api.visibility import for_access

# A fragment of SQL as the query (its parameters) and the access's kind (restricted or
# not) choose it.
Fragment = Callable[[Any, bool], str]


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Filter:
    """Query parameter `param`, when given, adds `sql` (an `AND ...` fragment, visibility
    marks resolved per access; or a function of the query and the access's kind choosing
    one) and binds its value, converted by `bind`, as `arg` (default: `param`; `bind`
    None: binds nothing). `empty`: whether an empty string counts as given."""

    param: str
    sql: str | Fragment
    arg: str | None = None
    bind: Callable[[Any], Any] | None = _same
    empty: bool = True

    def given(self, query: Any) -> bool:
        value = getattr(query, self.param)
        return value is not None and (self.empty or value != "")

    def fragment(self, query: Any, restricted: bool) -> str:
        if isinstance(self.sql, str):
            return for_access(self.sql, restricted)
        return self.sql(query, restricted)


@dataclass(frozen=True)
class Sort:
    """A `sort` value: its ORDER BY, the condition reading past a cursor (`%(a0)s`, ... the
    cursor's key, of `types`), and the key of a row (the next cursor)."""

    order: str
    after: str
    types: Sequence[type]
    key: Callable[[Any], Sequence[Any]]


@dataclass(frozen=True)
class Listed:
    """A page of a list: its rows, the next cursor, the total and whether it is exact."""

    rows: list[Any]
    next_cursor: str | None
    total: int
    total_is_exact: bool

    def page(self) -> dict[str, Any]:
        """The page's fields besides its items (a *Page struct's keywords)."""
        return {
            "next_cursor": self.next_cursor,
            "total": self.total,
            "total_is_exact": self.total_is_exact,
        }


@dataclass(frozen=True)
class Listing:
    """A list's declaration. `select(query, restricted, filters, order)` and
    `count(query, restricted, filters)` give its statements (see `templates`); `sorts` by
    the query's `sort` (a list without one: its only sort under the key ""); `visible`: the
    first filter of a restricted access; `bound`: whether the cursor is bound to the
    filters and sort (bound_kind) or only to the list's `kind`; `total_column`: the
    column of the list statement holding the whole list's exact total (`count` then counts
    only past the last page), else the total is counted to pagination.TOTAL_CAP;
    `extra_args`: what the statements bind whatever the filters; `narrow(query, restricted,
    filters, order)`: for a query it serves (else None), a list statement reading the rows
    from where `count` finds them, run instead of `select` when the count, then run first,
    finds at most `narrow_below` (a walk in the list's order past many rows that do not
    match costs more than sorting the few that do: the late jobs among every job);
    `settings(query)`: the planner's methods off for the page and total of a query the
    planner would otherwise sort every row for (not for the `narrow` page), or None."""

    kind: str
    select: Callable[[Any, bool, str, str], str]
    count: Callable[[Any, bool, str], str]
    sorts: dict[str, Sort]
    filters: tuple[Filter, ...] = ()
    visible: Callable[[Access], str] | None = None
    bound: bool = True
    total_column: int | None = None
    extra_args: Callable[[Any], dict[str, Any]] = field(default=lambda query: {})
    narrow: Callable[[Any, bool, str, str], str | None] | None = None
    narrow_below: int = 0
    settings: Callable[[Any], Planner | None] = field(default=lambda query: None)

    def sort(self, query: Any) -> Sort:
        return self.sorts[getattr(query, "sort", "")]

    def plan(self, query: Any, access: Access) -> Planned:
        """The statements of the page `query` asks for, as `access` sees it (400 for a
        cursor this list did not hand out with these filters and sort)."""
        restricted = access.restricted
        visible = self.visible(access) if self.visible is not None and restricted else ""
        filters: list[str] = [visible] if visible else []
        args: dict[str, Any] = {
            "limit": query.limit + 1,
            **self.extra_args(query),
            **access.sql_params(),
        }
        for f in self.filters:
            if f.given(query):
                fragment = f.fragment(query, restricted)
                if fragment:
                    filters.append(fragment)
                if f.bind is not None:
                    args[f.arg or f.param] = f.bind(getattr(query, f.param))
        counted = self.count(query, restricted, "\n  ".join(filters))
        sort = self.sort(query)
        kind = bound_kind(self.kind, query) if self.bound else self.kind
        if query.cursor is not None:
            key = decode_cursor(query.cursor, kind, sort.types)
            args.update({f"a{i}": v for i, v in enumerate(key)})
            filters.append(sort.after)
        sql = self.select(query, restricted, "\n  ".join(filters), sort.order)
        narrow = None
        if self.narrow is not None:
            narrow = self.narrow(query, restricted, "\n  ".join(filters), sort.order)
        return Planned(self, query, sql, counted, args, kind, sort, narrow, self.settings(query))

    async def serve(self, request: Request, op: Operation) -> Listed:
        """The page the query of `op` asks for, as the caller may see it (its Access is kept
        on the request), on a read connection of its own (taken once the statements are
        planned, so a bad cursor takes none)."""
        query = op.parse_query(request)
        planned = self.plan(query, await access_of(request))
        async with connection(request) as conn:
            return await planned.read(conn)


@dataclass(frozen=True)
class Planned:
    """A page's statements, bound: `read` runs them."""

    listing: Listing
    query: Any
    sql: str
    count: str
    args: dict[str, Any]
    kind: str
    sort: Sort
    narrow: str | None = None
    settings: Planner | None = None

    async def read(self, conn: AsyncConnection[Any]) -> Listed:
        """The page's rows and next cursor, and the list's total (with `settings` in force)."""
        async with planner.turned_off(conn, self.settings):
            return await self._read(conn)

    async def _read(self, conn: AsyncConnection[Any]) -> Listed:
        if self.narrow is not None:
            (counted,) = await row(conn, self.count, self.args)
            few = counted <= self.listing.narrow_below
            if few:  # (the settings are the walk's: the few matches are sorted)
                await planner.turn_on(conn, self.settings)
            found = await rows(conn, self.narrow if few else self.sql, self.args)
            items, next_cursor = page(found, self.query.limit, self.kind, self.sort.key)
            return Listed(items, next_cursor, *capped(counted))
        found = await rows(conn, self.sql, self.args)
        items, next_cursor = page(found, self.query.limit, self.kind, self.sort.key)
        whole = items if self.query.cursor is None and next_cursor is None else None
        column = self.listing.total_column
        if column is None:
            counted, exact = await total(conn, self.count, self.args, whole)
        elif found:
            counted, exact = found[0][column], True
        else:
            counted, exact = (await rows(conn, self.count, self.args))[0][0], True
        return Listed(items, next_cursor, counted, exact)


def templates(
    select: dict[bool, str], count: str
) -> tuple[Callable[[Any, bool, str, str], str], Callable[[Any, bool, str], str]]:
    """`select` and `count` of a list whose statements are fixed texts: the list statement
    by the access's kind (visibility.both), formatted with `{filters}` and `{order}`, and
    the count_capped statement, with `{filters}`."""

    def selected(query: Any, restricted: bool, filters: str, order: str) -> str:
        return select[restricted].format(filters=filters, order=order)

    def counted(query: Any, restricted: bool, filters: str) -> str:
        return count.format(filters=filters)

    return selected, counted
