"""GET /search's probe: a page of substring hits looked for along a name index.

A probe reads the first PROBE_ROWS rows of a table in the order of its lowercase name's
index (`text_pattern_ops`), from the cursor up to a bound, and its caller tests `q` outside
that read, so it stops at a page or at PROBE_ROWS rows (ordered by `low`, the read's own
column: no sort waits for all of them). Through the trigram indexes the same page first
builds a bitmap of every row with `q`'s trigrams (38,000 for a word in a fifth of 200,000
names, 100,000 for `_id` in 400,000 fields: 26-40 ms) whatever the bound cuts. Names
(api/search.py) and fields (api/search_fields.py) are probed alike.
"""

from __future__ import annotations

PROBE_ROWS = 2_000
SOURCE = """(
        SELECT {columns}, lower(s.name) AS low FROM {table} s
        WHERE true {upper} {start} {where}
        ORDER BY lower(s.name) USING ~<~, s.{key} LIMIT {rows})"""


def source(
    table: str,
    key: str,
    upper: str | None,
    after: bool,
    where: str = "",
    rows: str | None = None,
    columns: str = "s.*",
) -> str:
    """The rows probed, a subquery (alias it): `table`'s first PROBE_ROWS rows in name
    order, ties by its column `key`, from the cursor's name (`%(after_name)s`) when `after`,
    up to the parameter named `upper`, those with the condition `where` (on `s`) alone;
    `rows`: the parameter holding how many rows instead of PROBE_ROWS; `columns`: those the
    caller reads (a job's row is wide: sorting 35,000 of them whole took a third of a
    probe)."""
    start = "AND lower(s.name) ~>=~ %(after_name)s" if after else ""
    limit = str(PROBE_ROWS) if rows is None else f"%({rows})s"
    below = "" if upper is None else f"AND lower(s.name) ~<=~ %({upper})s"
    return SOURCE.format(
        columns=columns, table=table, key=key, upper=below, start=start, where=where, rows=limit
    )
