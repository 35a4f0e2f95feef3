"""Where the projection lag's tail falls in time: the lag benchmark's run, second by second.

    python -m bench.scenario lag-timeline [--rate 1000] [--seconds 60] [--setting NAME=VALUE]

Runs make bench's lag figure (bench/fig_lag.py: `metastore api` and `metastore projector` on
a throwaway PostgreSQL, an open-loop client at `--rate` events/s) with the server logging its
checkpoints and every autovacuum, then prints the lag's p50 and p99, each second whose worst
lag passed 0.1 s (its events and that worst lag), how many events lagged over 0.1 s, and the
server's checkpoints and autovacuums at their second of the run: whether the tail is one
stall or spread over the run. `--setting` changes a server setting for the run. And what the
server's processes wrote (pg_stat_bgwriter), and when the kernel wrote back a burst of dirty
pages (/proc/meminfo's Dirty, sampled every half second: where it fell by 50 MB or more).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import psycopg.sql

from bench import datagen, fig_lag, loadgen
from bench.harness import WARM_WAL_SEGMENTS, cluster
from bench.scenario import parser

TAIL_S = 0.1
LOGGED = ("checkpoint", "automatic vacuum")
# the server log's line prefix: `%m` (milliseconds, UTC)
STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC")


def main(argv: list[str]) -> int:
    cli = parser("lag-timeline", __doc__, other=False, rounds=None)
    cli.add_argument("--rate", type=int, default=1_000)
    cli.add_argument("--seconds", type=float, default=60.0)
    cli.add_argument("--seed", type=int, default=20241017)
    cli.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server setting for the run (ALTER SYSTEM), e.g. backend_flush_after=256kB",
    )
    args = cli.parse_args(argv)
    bodies = list(datagen.events(100_000, int(args.rate * args.seconds), args.seed + 3))
    with cluster("lag-timeline", WARM_WAL_SEGMENTS) as pg, tempfile.TemporaryDirectory() as logs:
        url = pg.database()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET log_autovacuum_min_duration = 0")
            conn.execute("ALTER SYSTEM SET log_checkpoints = on")
            for setting in args.setting:
                name, _, value = setting.partition("=")
                conn.execute(
                    psycopg.sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        psycopg.sql.Identifier(name), psycopg.sql.Literal(value)
                    )
                )
            conn.execute("SELECT pg_reload_conf()")
        wall = time.time() - time.perf_counter()  # perf_counter -> epoch seconds
        before = _buffers_written(url)
        with _dirty_pages() as dirty:
            found = fig_lag.run(url, bodies, args.rate, args.seconds, Path(logs))
        written = {k: v - before[k] for k, v in _buffers_written(url).items()}
        server_log = pg.pg.logfile.read_text(errors="replace")
    lags, missing = fig_lag.lags_of(found)
    values = [lag for _, lag in lags]
    print(
        f"lag p50 {loadgen.percentile(values, 50):.3f} s, p99 {loadgen.percentile(values, 99):.3f}"
        f" s, max {max(values):.3f} s; {sum(v > TAIL_S for v in values):,} of {len(values):,}"
        f" events over {TAIL_S} s, {missing} never visible"
    )
    worst: dict[int, tuple[int, float]] = {}
    for acked, lag in lags:
        second = int(acked - found.started)
        events, most = worst.get(second, (0, 0.0))
        worst[second] = (events + 1, max(most, lag))
    print(f"seconds whose worst lag passed {TAIL_S} s (second: events, worst s):")
    print(
        "  " + ", ".join(f"{s}: {n}, {w:.3f}" for s, (n, w) in sorted(worst.items()) if w > TAIL_S)
    )
    print(
        "buffers the server wrote during the run (8 kB each; the kernel flushes what nobody"
        " synced 30 s after): " + ", ".join(f"{k} {v:,}" for k, v in written.items())
    )
    falls = [
        f"{at - found.started:.1f} s: {high - low:,} MB"
        for (at, high), (_, low) in itertools.pairwise(dirty)
        if high - low >= DIRTY_FALL_MB
    ]
    print("the kernel's writeback bursts (second of the run: Dirty fell by): " + ", ".join(falls))
    start = wall + found.started
    print("the server's checkpoints and autovacuums (second of the run):")
    for line in server_log.splitlines():
        stamp = STAMP.match(line)
        if stamp and any(word in line for word in LOGGED) and "template1" not in line:
            at = dt.datetime.fromisoformat(stamp.group(1)).replace(tzinfo=dt.UTC).timestamp()
            print(f"  {at - start:6.1f}  {line[line.find('LOG:') + 5 :].strip()[:110]}")
    return 0


def _buffers_written(url: str) -> dict[str, int]:
    """pg_stat_bgwriter's buffers written so far, by writer: the checkpointer, the background
    writer (both ask the kernel to flush as they go) and the backends (which do not, unless
    backend_flush_after is set)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT buffers_checkpoint, buffers_clean, buffers_backend FROM pg_stat_bgwriter"
        ).fetchone()
    assert row is not None
    return dict(zip(("checkpointer", "background writer", "backends"), row, strict=True))


DIRTY_FALL_MB = 50


@contextlib.contextmanager
def _dirty_pages() -> Iterator[list[tuple[float, int]]]:
    """(perf_counter, /proc/meminfo's Dirty in MB) every half second while the block runs."""
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("Dirty:"):
                    samples.append((time.perf_counter(), int(line.split()[1]) // 1024))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield samples
    finally:
        done.set()
        sampler.join()
