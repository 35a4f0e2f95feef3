"""Where the bytes are: each table's heap, TOAST and indexes, and each column's share.

`table_sizes` is cheap (catalog functions); `column_sizes` reads every row of a table
(sum of pg_column_size per column), so the scale run does it once, at its largest size.
Also a command, for a store left running (`--keep`):

    python -m bench.scale_storage postgresql://...   # tables, columns, indexes
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec
import psycopg
from psycopg import sql


class TableSize(msgspec.Struct):
    table: str  # "event_log" (all partitions), "event_digests", "readmodel.<name>", ...
    rows: int
    heap: int  # main fork (and free space map, visibility map)
    toast: int  # TOAST table and its index
    indexes: int
    total: int


# Every table of the log's side (event_log's partitions summed) and of the read models.
TABLE_SIZES = """
WITH t AS (
    SELECT CASE WHEN i.inhparent = 'event_log'::regclass THEN 'event_log'
                WHEN n.nspname = 'readmodel' THEN 'readmodel.' || c.relname
                ELSE c.relname END AS name,
           c.oid, c.reltoastrelid, c.reltuples
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
    WHERE c.relkind = 'r' AND n.nspname IN ('public', 'readmodel')
)
SELECT name,
       sum(greatest(reltuples, 0))::bigint,
       sum(pg_table_size(oid) - CASE WHEN reltoastrelid = 0 THEN 0
           ELSE pg_total_relation_size(reltoastrelid) END)::bigint,
       sum(CASE WHEN reltoastrelid = 0 THEN 0
           ELSE pg_total_relation_size(reltoastrelid) END)::bigint,
       sum(pg_indexes_size(oid))::bigint,
       sum(pg_total_relation_size(oid))::bigint
FROM t GROUP BY name ORDER BY name
"""
INDEX_SIZES = """
SELECT c.relname, i.relname, pg_relation_size(i.oid)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'readmodel'
ORDER BY 3 DESC
"""
COLUMNS = """
SELECT attname FROM pg_attribute
WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum
"""
LOG_TABLES = ("event_log", "event_digests")


def analyze(conn: psycopg.Connection[Any]) -> None:
    """VACUUM ANALYZE everything, so reltuples and the free space maps are current."""
    conn.execute("VACUUM ANALYZE")


def table_sizes(conn: psycopg.Connection[Any]) -> list[TableSize]:
    return [TableSize(*row) for row in conn.execute(TABLE_SIZES).fetchall()]


def index_sizes(conn: psycopg.Connection[Any]) -> list[tuple[str, str, int]]:
    return [(t, i, int(n)) for t, i, n in conn.execute(INDEX_SIZES).fetchall()]


def column_sizes(conn: psycopg.Connection[Any], table: str) -> dict[str, int]:
    """The bytes each column of `table` takes as stored (compressed, TOASTed), summed."""
    names = [r[0] for r in conn.execute(COLUMNS, (table,)).fetchall()]
    if not names:
        return {}
    schema, _, name = table.rpartition(".")
    query = sql.SQL("SELECT {} FROM {}").format(
        sql.SQL(", ").join(
            sql.SQL("coalesce(sum(pg_column_size({})), 0)::bigint").format(sql.Identifier(n))
            for n in names
        ),
        sql.Identifier(schema, name) if schema else sql.Identifier(name),
    )
    row = conn.execute(query).fetchone()
    assert row is not None
    return dict(zip(names, (int(v) for v in row), strict=True))


def readmodel_tables(sizes: list[TableSize]) -> list[str]:
    return [s.table for s in sizes if s.table.startswith("readmodel.")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("url", help="the loaded store's database URL")
    args = parser.parse_args(argv)
    with psycopg.connect(args.url, autocommit=True) as conn:
        sizes = table_sizes(conn)
        for s in sizes:
            print(
                f"{s.table:40} rows {s.rows:>12,} heap {s.heap / 2**20:>9,.1f} MiB "
                f"toast {s.toast / 2**20:>9,.1f} indexes {s.indexes / 2**20:>9,.1f} "
                f"total {s.total / 2**20:>9,.1f}"
            )
        for table, index, size in index_sizes(conn):
            print(f"index {table:28} {index:40} {size / 2**20:>9,.1f} MiB")
        for table in readmodel_tables(sizes):
            for column, size in column_sizes(conn, table).items():
                print(f"column {table:32} {column:24} {size / 2**20:>9,.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
