"""The event log's column type: json or jsonb, pglz or lz4 (docs/PERFORMANCE.md).

    python -m bench.log_column [--events 20000] [--rounds 3]

COPYs the same generated events (the benchmark workload's, 3 KB on average) into bare
one-column tables on a throwaway PostgreSQL (fsync on), then reads them back as text,
each variant in turn, for `rounds` rounds in a rotating order, and prints events/s for
each step and the bytes a stored event takes (heap + TOAST). No HTTP, no checks, no
indexes: what the column type alone costs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import psycopg

from bench import datagen
from bench.harness import WARM_WAL_SEGMENTS, cluster
from bench.sizes import QUICK, SEED

VARIANTS = {
    "jsonb, pglz": "jsonb COMPRESSION pglz",
    "json, pglz": "json COMPRESSION pglz",
    "json, lz4": "json COMPRESSION lz4",
}


def _measure(url: str, table: str, column: str, events: Sequence[bytes]) -> tuple[float, ...]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} (event {column})")
        started = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur, cur.copy(f"COPY {table} FROM STDIN") as copy:
            for event in events:
                copy.write_row((event.decode(),))
        write = len(events) / (time.perf_counter() - started)
        conn.execute(f"VACUUM ANALYZE {table}")
        started = time.perf_counter()
        with conn.cursor() as cur:
            cur.execute(f"SELECT event::text FROM {table}")
            read = len(cur.fetchall()) / (time.perf_counter() - started)
        row = conn.execute(f"SELECT pg_total_relation_size('{table}')").fetchone()
        size = (row[0] if row else 0) / len(events)
    return write, read, size


DEFAULT_EVENTS = 20_000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=DEFAULT_EVENTS)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    events = list(datagen.events(max(1_000, args.events // 5), args.events, SEED))
    mean = sum(map(len, events)) / len(events)
    print(f"{len(events):,} events, {mean:,.0f} bytes of JSON on average")
    results: dict[str, list[tuple[float, ...]]] = {name: [] for name in VARIANTS}
    # A run smaller than the default (the suite's) recycles a few WAL segments, not 1 GB.
    small = args.events < DEFAULT_EVENTS
    with cluster("log-column", QUICK.wal_segments if small else WARM_WAL_SEGMENTS) as pg:
        url = pg.database()
        names = list(VARIANTS)
        for round_ in range(args.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                table = "t_" + name.replace(", ", "_")
                results[name].append(_measure(url, table, VARIANTS[name], events))
    print(f"{'column':<14}{'COPY events/s':>16}{'read events/s':>16}{'bytes/event':>14}")
    for name, runs in results.items():
        write, read, size = (statistics.median(r[i] for r in runs) for i in range(3))
        print(f"{name:<14}{write:>16,.0f}{read:>16,.0f}{size:>14,.0f}")
    print(f"(medians of {args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
