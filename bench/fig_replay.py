"""Replay: `metastore replay` rebuilds every read model from the whole log (1,000,000 events).

Run as the real command in a child process: the time, and its memory. Peak memory must
not grow with the log: the VmHWM after the first quarter of the run is the baseline of
the peak at the end.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.context import Context
from bench.harness import python_env, run_child
from bench.report import Row, now

GROUP = "log"
REPLAYED = re.compile(r"replayed ([\d,]+) events")


def rows(ctx: Context) -> list[Row]:
    n = ctx.sizes.log_events
    # The target is 1,000,000 events in under 5 minutes: 3,334 events/s.
    return [
        Row(
            "replay, events/s",
            "events/s",
            baseline_label="fold rate above",
            target=">= 3,334 (1,000,000 in < 5 min)",
            check=lambda v: n / v < 300,
            command=ctx.command(GROUP),
        ),
        Row(
            "replay peak RSS, MiB",
            "MiB",
            baseline_label="peak after the first quarter",
            target="not growing with the log",
            command=ctx.command(GROUP),
        ),
    ]


def replay(
    url: str, log_path: Path, expected: int, extra: dict[str, str] | None = None
) -> tuple[int, float, int, list[tuple[float, int]]]:
    """`metastore replay` in a child: (events replayed, seconds, peak KiB, VmHWM samples)."""
    seconds, peak_kib, samples = run_child(
        ["-m", "metastore", "replay", "--no-progress"], python_env(url, extra), log_path
    )
    match = REPLAYED.search(log_path.read_text(errors="replace"))
    replayed = int(match.group(1).replace(",", "")) if match else expected
    return replayed, seconds, peak_kib, samples


def measure(ctx: Context, out: list[Row], url: str, fold_rate: float | None) -> None:
    rate, rss = out
    ctx.say(f"replay: metastore replay over {ctx.sizes.log_events:,} events")
    replayed, seconds, peak_kib, samples = replay(
        url, ctx.log_dir / "replay.log", ctx.sizes.log_events
    )
    quarter = [hwm for t, hwm in samples if t <= seconds / 4]
    rate.value = replayed / seconds
    rate.baseline = fold_rate
    rss.value = peak_kib / 1024
    rss.baseline = (max(quarter) / 1024) if quarter else None
    # Not growing: the peak at the end is within 25 % (+ 32 MiB of slack) of the early one.
    if rss.baseline is not None:
        early = rss.baseline
        rss.check = lambda v: v <= early * 1.25 + 32
    rate.measured_at = rss.measured_at = now()
    rate.note = (
        f"`metastore replay --no-progress` (a child process, the whole command "
        f"including the swap) replayed {replayed:,} events in {seconds:.1f} s."
    )
    marks = []
    for share in (0.25, 0.5, 0.75):
        upto = [hwm for t, hwm in samples if t <= seconds * share]
        marks.append(f"{max(upto) / 1024:.0f}" if upto else "?")
    rss.note = (
        "VmHWM of the replay process sampled every 0.1 s to its end, against the same "
        "up to a quarter of the run's time (VmHWM at 25/50/75 % of the run: "
        f"{' / '.join(marks)} MiB)."
    )
    ctx.say(f"replay: {rate.value:,.0f}/s, peak {rss.value:.0f} MiB")
