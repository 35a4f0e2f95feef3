"""Times the fold in the projector's live shape (small batches on a growing store), A/B.

    python -m bench.scenario live-fold --events 14000 --limit 700 --rounds 2 [--other SRC]

Each run (a child process per source tree, in turns) starts a throwaway PostgreSQL with
pg_stat_statements, appends `--events` events of the lag benchmark's workload (bench.datagen,
the seed of bench/fig_lag.py) in transactions of 50 as ingest's group commit does, then folds
them in batches of `--limit` on one connection, one projection after the other and without a
pipeline, so each projection's seconds (its Python and its server's time) add up to the
fold. Prints the fold rate, each projection's seconds, the statements that took the most
server time, and the plan of lineage's settle of the last batch's run edges (the statement
whose plan on a fresh store held the projection lag at seconds: docs/PERFORMANCE.md).
SRC is a source tree or a commit (bench/ab.py). Formerly scripts/time_live_fold.py.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from argparse import ArgumentParser
from typing import TYPE_CHECKING, Any

from bench.ab import other_tree, turns
from bench.scenario import parser

if TYPE_CHECKING:
    import psycopg

# The child's server loads pg_stat_statements: its start options get the library (both
# scenarios' children run this text, on this tree's code or the other's).
WITH_STATEMENTS = r"""_run = EmbeddedPostgres._run

def with_statements(self, *args, **kwargs):
    extra = " -c shared_preload_libraries=pg_stat_statements"
    args = tuple(a + extra if isinstance(a, str) and "listen_addresses" in a else a for a in args)
    return _run(self, *args, **kwargs)

EmbeddedPostgres._run = with_statements
"""


def past_partitions(conn: psycopg.Connection[Any], months: int) -> None:
    """`months` empty monthly partitions of the log before the current one: a store that
    old for what the statements that read the log cost to plan."""
    for back in range(1, months + 1):
        (month,) = conn.execute(
            "SELECT (date_trunc('month', now()) - make_interval(months => %s))::date", (back,)
        ).fetchone() or (None,)
        conn.execute(
            f"CREATE TABLE event_log_past_{back} PARTITION OF event_log"
            f" FOR VALUES FROM ('{month}') TO ('{month}'::date + interval '1 month')"
        )


# past_partitions as text, as WITH_STATEMENTS, for the children running another tree's code.
PAST_PARTITIONS = "from typing import Any\n" + inspect.getsource(past_partitions)

CHILD = (
    r'''
import collections, sys, tempfile, time
from pathlib import Path
import psycopg
from psycopg.rows import tuple_row
from bench import datagen
from metastore import pgarray
from metastore.catalogs import NO_CATALOGS
from metastore.embedded_pg import EmbeddedPostgres
from metastore.eventlog import append_events
from metastore.migrations import apply_migrations
from projections import common, lineage
from projections.fold import (
    BatchResult, load_cursors, read_batch, save_cursors, set_search_path, tune_session,
)
from projections.replay import prepare_tables
from projections.schema import LIVE_SCHEMA, PROJECTIONS, adopt_rules

EVENTS, LIMIT = int(sys.argv[1]), int(sys.argv[2])
STATEMENTS = """
SELECT round(total_exec_time::numeric), calls, rows,
       left(regexp_replace(query, '\s+', ' ', 'g'), 110)
FROM pg_stat_statements WHERE query NOT LIKE 'EXPLAIN%%'
ORDER BY total_exec_time DESC LIMIT 12
"""
'''
    + WITH_STATEMENTS
    + r"""folder = Path(tempfile.mkdtemp(prefix="time-live-fold-", dir="/tmp"))
pg = EmbeddedPostgres(folder, fast_unsafe=True)
url = pg.start()
try:
    apply_migrations(url)
    prepare_tables(url, NO_CATALOGS)
    records = [datagen.to_record(b) for b in datagen.events(100_000, EVENTS, 7 + 3)]
    with psycopg.connect(url) as conn:
        for start in range(0, len(records), 50):
            with conn.transaction():
                append_events(conn, records[start : start + 50])
        conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.commit()
        conn.execute("SELECT pg_stat_statements_reset()")
        conn.commit()
    seconds = collections.Counter()
    with psycopg.connect(url) as conn:
        tune_session(conn)
        with conn.transaction():
            adopt_rules(conn, NO_CATALOGS)
        done, started = 0, time.perf_counter()
        while True:
            with conn.transaction():
                set_search_path(conn, LIVE_SCHEMA)
                cursors = load_cursors(conn, PROJECTIONS)
                at = time.perf_counter()
                batch = read_batch(conn, min(cursors.values()), LIMIT)
                seconds["read and decode"] += time.perf_counter() - at
                if batch.last is None:
                    break
                last_events = batch.events
                with conn.cursor(row_factory=tuple_row) as cur:
                    pgarray.register(cur)
                    for projection in PROJECTIONS:
                        at = time.perf_counter()
                        projection.fold(cur, batch.events)
                        seconds[projection.NAME] += time.perf_counter() - at
                folded = {p.NAME: batch.read for p in PROJECTIONS}
                cursors = dict.fromkeys(folded, batch.last)
                save_cursors(conn, cursors, BatchResult(batch.read, folded, batch.received_at))
            done += batch.read
        elapsed = time.perf_counter() - started
    print(f"  {done:,} events in {elapsed:.1f} s, {done / elapsed:,.0f} events/s")
    print("  seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    with psycopg.connect(url) as conn:
        print("  statements (total ms, calls, rows, text):")
        for row in conn.execute(STATEMENTS):
            print("    ", *row)
        conn.execute("SET search_path TO readmodel, public")
        for method in getattr(common, "INDEX_PROBES_ONLY", ()):
            conn.execute(f"SET {method} = off")
        plan = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) " + lineage.SETTLE_RUN_WRITES,
            {"runs": list(common.run_ids(last_events))},
        ).fetchall()
        conn.rollback()
        print("  the last batch's settle of its run edges:")
        for (line,) in plan:
            if "ANY (" not in line:
                print("    " + line)
finally:
    pg.destroy()
"""
)


def main(argv: list[str]) -> int:
    args = live_parser("live-fold", __doc__, 14_000, 700).parse_args(argv)
    in_turns(CHILD, [str(args.events), str(args.limit)], args.other, args.rounds)
    return 0


def live_parser(name: str, doc: str | None, events: int, limit: int) -> ArgumentParser:
    """The command line of a scenario folding `--events` events in batches of `--limit`."""
    cli = parser(name, doc, rounds=2)
    cli.add_argument("--events", type=int, default=events)
    cli.add_argument("--limit", type=int, default=limit, help="events a batch")
    return cli


def in_turns(child: str, child_args: list[str], other: str | None, rounds: int) -> None:
    """Runs the script `child` (with `child_args`) on this tree's code and `other`'s, in
    turns (bench/ab.py), each run a process of its own in its tree."""
    with other_tree(other) as sides:
        for round_, (name, src) in turns(sides, rounds):
            print(f"round {round_ + 1} {name} ({src}):", flush=True)
            env = {**os.environ, "PYTHONPATH": str(src)}
            argv = [sys.executable, "-c", child, *child_args]
            subprocess.run(argv, env=env, cwd=src, check=True)
