"""How long `metastore migrate` builds the log's indexes a partition at a time; what appends wait.

    python -m bench.scenario log-index-build [--events 1000000] [--seconds 10] [--blocking]

COPYs `--events` events of make bench's `log` workload (bench/datagen.py) into a throwaway
PostgreSQL, leaves the indexes of sql/0006.log-indexes.sql and sql/0007.log-run-time.sql as
those migrations do (ON ONLY the log, no partition's index), then runs
metastore/log_indexes.py's `build` while a client appends one event at a time, each its own
transaction (what one ingest request does). Prints the build's time and the appends'
latency before and during it (p50, p99, max): a CREATE INDEX of the partitioned log would
hold every append for the whole build: `--blocking` builds them so instead, for the
comparison. `--seconds`: how long the appends are timed alone first.
"""

from __future__ import annotations

import threading
import time

import psycopg

from bench import datagen
from bench.harness import cluster, copy_records
from bench.scenario import parser
from metastore import log_indexes
from metastore.eventlog import append_events

# The indexes migrations 0006 and 0007 add to the log.
INDEXES = ["event_log_job_time", "event_log_run_ends", "event_log_run_time"]
VALID = "SELECT bool_and(indisvalid) FROM pg_index WHERE indexrelid = ANY(%s::regclass[])"
# Each index's definition as PostgreSQL prints it: `CREATE INDEX ... ON ONLY ...`.
DEFINITIONS = "SELECT pg_get_indexdef(i::regclass) FROM unnest(%s::text[]) AS i"


def quantiles(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    if not ordered:
        return "no appends"
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return (
        f"{len(ordered):,} appends, p50 {pick(0.5) * 1000:.1f} ms, p99 {pick(0.99) * 1000:.1f} "
        f"ms, max {ordered[-1] * 1000:.1f} ms"
    )


def main(argv: list[str]) -> int:
    cli = parser("log-index-build", __doc__, other=False, rounds=None)
    cli.add_argument("--events", type=int, default=1_000_000)
    cli.add_argument("--seconds", type=float, default=10.0)
    cli.add_argument("--seed", type=int, default=20241017)
    cli.add_argument("--blocking", action="store_true", help="CREATE INDEX of the whole log")
    args = cli.parse_args(argv)
    gen = datagen.Generator(datagen.build_graph(100_000, args.seed), args.seed)
    with cluster("log-index-build") as pg:
        url = pg.database()
        loaded = copy_records(url, (datagen.to_record(b) for b in gen.events(args.events)))
        print(f"log: {loaded.events:,} events COPYed in {loaded.seconds:.0f} s")
        extra = (
            datagen.to_record(b)
            for b in datagen.Generator(
                datagen.build_graph(1_000, args.seed + 1), args.seed + 1
            ).events(10**9)
        )
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE event_log")
            definitions = [d for (d,) in conn.execute(DEFINITIONS, (INDEXES,))]
            for name, definition in zip(INDEXES, definitions, strict=True):
                conn.execute(f"DROP INDEX {name}")  # (with every partition's)
                conn.execute(definition)
        stop, building = threading.Event(), threading.Event()
        alone: list[float] = []
        during: list[float] = []

        def append_one_at_a_time() -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                while not stop.is_set():
                    started = time.perf_counter()
                    append_events(conn, [next(extra)])
                    (during if building.is_set() else alone).append(time.perf_counter() - started)
                    time.sleep(0.002)

        appender = threading.Thread(target=append_one_at_a_time)
        appender.start()
        try:
            time.sleep(args.seconds)
            with psycopg.connect(url, autocommit=True) as conn:
                building.set()
                started = time.perf_counter()
                if args.blocking:
                    built = []
                    for name, definition in zip(INDEXES, definitions, strict=True):
                        conn.execute(f"DROP INDEX {name}")
                        conn.execute(definition.replace(" ON ONLY ", " ON ", 1))
                        built.append(f"{name} (the log's, one statement)")
                else:
                    built = log_indexes.build(conn)
                seconds = time.perf_counter() - started
                valid = conn.execute(VALID, (INDEXES,)).fetchone()
        finally:
            stop.set()
            appender.join()
    what = "indexes of the whole log" if args.blocking else "partition indexes"
    print(
        f"build: {len(built)} {what}"
        f" in {seconds:.1f} s ({loaded.events / seconds:,.0f} events/s), the log's indexes "
        f"valid: {valid == (True,)}"
    )
    print(f"appends alone ({args.seconds:g} s): {quantiles(alone)}")
    print(f"appends during the build: {quantiles(during)}")
    return 0
