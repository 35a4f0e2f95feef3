"""Projector fold rate: fold the first 200,000 events of the workload into empty read models.

`projections.runner.catch_up(url)` (what the projector process does, once, synchronously)
runs in a child process, so its time and peak memory are its own. The baseline, in a child
of its own just after (so the fold finds the log as COPY left it): reading and decoding the
same events batch by batch (`projections.fold.read_batch`), the fold's first step without
any fold. This machine's speed drifts by a third within the hour, and the ratio shows what
is the fold and what is the machine.
"""

from __future__ import annotations

from pathlib import Path

from bench.context import Context
from bench.harness import python_env, run_child
from bench.report import Row, at_least

GROUP = "log"
# Both with the catalog map of METASTORE_CATALOGS_FILE, when set (the scale corpus has one).
CATALOGS = """
import os
from metastore.catalogs import NO_CATALOGS, load_catalog_map
path = os.environ.get("METASTORE_CATALOGS_FILE")
catalogs = load_catalog_map(path) if path else NO_CATALOGS
"""
CATCH_UP = (
    CATALOGS
    + """
import sys
from projections.runner import catch_up
print(catch_up(sys.argv[1], catalogs=catalogs))
"""
)
# From the start of the log, or past the position (tx, seq) given as two more arguments,
# up to a number of events given as a fifth (0: to the end).
READ_ONLY = (
    CATALOGS
    + """
import sys, psycopg
from metastore.eventlog import Position
from projections.fold import BATCH_SIZE, read_batch
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    after, read = Position(*map(int, sys.argv[2:4])), 0
    limit = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    while (batch := read_batch(conn, after, BATCH_SIZE, catalogs)).last is not None:
        read, after = read + batch.read, batch.last
        if limit and read >= limit:
            break
print(read)
"""
)


ROW = Row(
    "projector fold rate, events/s",
    "events/s",
    baseline_label="reading and decoding the same events only, no folds",
    target=">= 5,000",
    check=at_least(5_000),
)


def rows(ctx: Context) -> list[Row]:
    return ctx.rows(GROUP, ROW)


def catch_up(
    url: str, log_path: Path, extra: dict[str, str] | None = None
) -> tuple[int, float, int]:
    """Folds what is in the log: (events folded, seconds, peak RSS KiB)."""
    seconds, peak_kib, _ = run_child(["-c", CATCH_UP, url], python_env(url, extra), log_path)
    folded = int(log_path.read_text().strip().splitlines()[-1])
    return folded, seconds, peak_kib


def read_only(
    url: str,
    log_path: Path,
    after: tuple[int, int] = (0, 0),
    extra: dict[str, str] | None = None,
    limit: int = 0,
) -> tuple[int, float]:
    """Reads and decodes the log past `after` (tx, seq) as the fold does, the first `limit`
    events of it (0: all): (events, seconds)."""
    argv = ["-c", READ_ONLY, url, *map(str, after), str(limit)]
    seconds, _, _ = run_child(argv, python_env(url, extra), log_path)
    return int(log_path.read_text().strip().splitlines()[-1]), seconds


def measure(ctx: Context, out: list[Row], url: str, events: int) -> float:
    """Folds the `events` already loaded; fills the row and returns the rate."""
    (row,) = out
    ctx.say(f"fold: catch_up over {events:,} events")
    folded, seconds, peak = catch_up(url, ctx.log_dir / "fold.log")
    ctx.say(f"fold: reading and decoding {events:,} events (the baseline)")
    read, read_seconds = read_only(url, ctx.log_dir / "fold-read-only.log")
    rate = folded / seconds
    row.record(
        rate,
        baseline=read / read_seconds,
        note=f"{folded:,} events (the first {events:,} of the workload: Spark and Airflow "
        f"application runs, START/RUNNING/COMPLETE) folded into empty read models by "
        f"`projections.runner.catch_up` in a child process in {seconds:.1f} s, peak RSS "
        f"{peak / 1024:.0f} MiB. Reading and decoding them alone took {read_seconds:.1f} s.",
    )
    ctx.say(f"fold: {rate:,.0f}/s")
    return rate
