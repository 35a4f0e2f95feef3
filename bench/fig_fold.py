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
from bench.report import Row, at_least, now

GROUP = "log"
CATCH_UP = "import sys; from projections.runner import catch_up; print(catch_up(sys.argv[1]))"
READ_ONLY = """
import sys, psycopg
from metastore.eventlog import START
from projections.fold import BATCH_SIZE, read_batch
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    after, read = START, 0
    while (batch := read_batch(conn, after, BATCH_SIZE)).last is not None:
        read, after = read + batch.read, batch.last
print(read)
"""


def rows(ctx: Context) -> list[Row]:
    return [
        Row(
            "projector fold rate, events/s",
            "events/s",
            baseline_label="reading and decoding the same events only, no folds",
            target=">= 5,000",
            check=at_least(5_000),
            command=ctx.command(GROUP),
        )
    ]


def catch_up(url: str, log_path: Path) -> tuple[int, float, int]:
    """Folds what is in the log: (events folded, seconds, peak RSS KiB)."""
    seconds, peak_kib, _ = run_child(["-c", CATCH_UP, url], python_env(url), log_path)
    folded = int(log_path.read_text().strip().splitlines()[-1])
    return folded, seconds, peak_kib


def measure(ctx: Context, out: list[Row], url: str, events: int) -> float:
    """Folds the `events` already loaded; fills the row and returns the rate."""
    (row,) = out
    ctx.say(f"fold: catch_up over {events:,} events")
    folded, seconds, peak = catch_up(url, ctx.log_dir / "fold.log")
    ctx.say(f"fold: reading and decoding {events:,} events (the baseline)")
    read_log = ctx.log_dir / "fold-read-only.log"
    read_seconds, _, _ = run_child(["-c", READ_ONLY, url], python_env(url), read_log)
    read = int(read_log.read_text().strip().splitlines()[-1])
    row.value = folded / seconds
    row.baseline = read / read_seconds
    row.measured_at = now()
    row.note = (
        f"{folded:,} events (the first {events:,} of the workload: Spark and Airflow "
        f"application runs, START/RUNNING/COMPLETE) folded into empty read models by "
        f"`projections.runner.catch_up` in a child process in {seconds:.1f} s, peak RSS "
        f"{peak / 1024:.0f} MiB. Reading and decoding them alone took {read_seconds:.1f} s."
    )
    ctx.say(f"fold: {row.value:,.0f}/s")
    return row.value
