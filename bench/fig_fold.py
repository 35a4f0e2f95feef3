"""Projector fold rate: fold the first 200,000 events of the workload into empty read models.

`projections.runner.catch_up(url)` (what the projector process does, once, synchronously)
runs in a child process, so its time and peak memory are its own.
"""

from __future__ import annotations

from pathlib import Path

from bench.context import Context
from bench.harness import python_env, run_child
from bench.report import Row, at_least, now

GROUP = "log"
CATCH_UP = "import sys; from projections.runner import catch_up; print(catch_up(sys.argv[1]))"


def rows(ctx: Context) -> list[Row]:
    return [
        Row(
            "projector fold rate, events/s",
            "events/s",
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
    row.value = folded / seconds
    row.measured_at = now()
    row.note = (
        f"{folded:,} events (the first {events:,} of the workload: Spark and Airflow "
        f"application runs, START/RUNNING/COMPLETE) folded into empty read models by "
        f"`projections.runner.catch_up` in a child process in {seconds:.1f} s, peak RSS "
        f"{peak / 1024:.0f} MiB."
    )
    ctx.say(f"fold: {row.value:,.0f}/s")
    return row.value
