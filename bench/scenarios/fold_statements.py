"""The fold's server work by statement and table (time, WAL, HOT updates), A/B.

    python -m bench.scenario fold-statements [--events 50000] [--nodes 100000]
        [--rounds 1] [--other TREE]

COPYs the first `--events` events of make bench's `log` workload (bench/datagen.py, its
seed and graph) into a throwaway PostgreSQL with pg_stat_statements, then folds them
(`catch_up`, the projector's path) into fresh copies of that database, this checkout's code
and the other tree's in turns, each side making its own read models. Prints each fold's
rate and WAL, the statements that took the most server time (ms, calls, rows, WAL bytes)
and each read-model table's inserted, updated and HOT-updated rows; with `--wal-records`,
the fold's WAL by record type (pg_waldump --stats=record: which rows, index entries and
speculative-insert confirmations the server wrote).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from bench import datagen
from bench.ab import other_tree, turns
from bench.harness import cluster, copy_records, python_child
from bench.scenario import parser
from bench.scenarios.fold import FOLD
from bench.scenarios.live_fold import WITH_STATEMENTS
from metastore.embedded_pg import EmbeddedPostgres

STATEMENTS = """
SELECT round(total_exec_time::numeric), calls, rows, wal_bytes,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time DESC LIMIT %s
"""
TOTALS = """
SELECT round(sum(total_exec_time)::numeric), sum(wal_bytes) FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
TABLES = """
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, pg_total_relation_size(relid)
FROM pg_stat_user_tables WHERE schemaname = 'readmodel' AND n_tup_ins + n_tup_upd > 0
ORDER BY n_tup_ins + n_tup_upd DESC
"""


def report(url: str, top: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        ms, wal = conn.execute(TOTALS).fetchone() or (0, 0)
        print(f"  server: {ms} ms in statements, WAL {int(wal or 0) / 2**20:,.1f} MiB")
        print("  statements (ms, calls, rows, WAL KiB, text):")
        for row in conn.execute(STATEMENTS, (top,)):
            print(f"    {row[0]:>7} {row[1]:>6} {row[2]:>8} {int(row[3]) // 1024:>8} {row[4]}")
        print("  tables (inserted, updated, HOT, deleted, MiB):")
        for name, ins, upd, hot, deleted, size in conn.execute(TABLES):
            print(f"    {name:<22} {ins:>9} {upd:>9} {hot:>9} {deleted:>9} {size / 2**20:>8.1f}")


# Checkpoints recycle WAL segments; pg_waldump needs the fold's to stay.
KEEP_WAL = ("ALTER SYSTEM SET max_wal_size = '20GB'", "ALTER SYSTEM SET checkpoint_timeout = '1h'")


# "Heap/INSERT  N (%)  record bytes (%)  FPI bytes (%)  combined bytes (%)"
RECORD_STATS = re.compile(r"^(\S+/\S+)\s+(\d+)\s+\(.*?\)\s+\d+\s+\(.*?\)\s+\d+\s+\(.*?\)\s+(\d+)")


def wal_records(pg: Any, start: str, end: str, top: int) -> None:
    """Prints the `top` record types of the WAL from `start` to `end` by bytes."""
    out = pg.pg._run(
        "pg_waldump", "--stats=record", "-p", str(pg.pg.pgdata / "pg_wal"), "-s", start, "-e", end
    ).stdout
    rows = []
    for line in out.splitlines():
        if found := RECORD_STATS.match(line):
            rows.append((int(found[3]), int(found[2]), found[1]))
    print("  WAL by record type (records, MiB):")
    for size, count, kind in sorted(rows, reverse=True)[:top]:
        print(f"    {kind:<26} {count:>9} {size / 2**20:>8.1f}")


def main(argv: list[str]) -> int:
    cli = parser("fold-statements", __doc__)
    cli.add_argument("--events", type=int, default=50_000)
    cli.add_argument("--nodes", type=int, default=100_000)
    cli.add_argument("--seed", type=int, default=20241017)
    cli.add_argument("--top", type=int, default=15)
    cli.add_argument("--wal-records", action="store_true")
    args = cli.parse_args(argv)
    # (this process starts the server: its options get pg_stat_statements)
    exec(WITH_STATEMENTS, {"EmbeddedPostgres": EmbeddedPostgres})
    with (
        other_tree(args.other) as sides,
        tempfile.TemporaryDirectory(prefix="metastore-fold-statements-") as tmp,
        cluster("fold-statements", warm=False, durable=False) as pg,
    ):
        url = pg.database()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            for setting in KEEP_WAL if args.wal_records else ():
                conn.execute(setting)
            conn.execute("SELECT pg_reload_conf()")
        gen = datagen.Generator(datagen.build_graph(args.nodes, args.seed), args.seed)
        copy_records(url, (datagen.to_record(b) for b in gen.events(args.events)))
        for round_, (name, tree) in turns(sides, args.rounds):
            target = pg.copy(url, f"fold_{round_}_{name}")
            with psycopg.connect(target, autocommit=True) as conn:
                conn.execute("SELECT pg_stat_statements_reset()")
                before: Any = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
            out = python_child(FOLD, [target], Path(tmp) / "fold.log", cwd=tree)
            count, seconds = out.split()
            with psycopg.connect(target, autocommit=True) as conn:
                wal = conn.execute(
                    "SELECT pg_current_wal_lsn() - %s::pg_lsn, pg_current_wal_lsn()::text",
                    (before[0],),
                ).fetchone()
            print(
                f"round {round_ + 1} {name}: {count} events in {float(seconds):.1f} s, "
                f"{int(count) / float(seconds):,.0f} events/s, "
                f"WAL {int(wal[0] if wal else 0) / 2**20:,.1f} MiB"
            )
            report(target, args.top)
            if args.wal_records and wal:
                wal_records(pg, str(before[0]), wal[1], args.top)
            pg.drop(target)
    return 0
