"""What a figure module gets: the sizes, where to put logs, how to name its command."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import loadgen
from bench.harness import memory_kib
from bench.report import Row, p95_rows
from bench.sizes import Sizes


@dataclass
class Context:
    sizes: Sizes
    log_dir: Path
    seed: int
    quick: bool

    def command(self, group: str) -> str:
        return f"python -m bench.run{' --quick' if self.quick else ''} --only {group}"

    def rows(self, group: str, *declared: Row) -> list[Row]:
        """Fresh copies of a group's declared rows, each naming the command that measures it."""
        return [dataclasses.replace(row, command=self.command(group)) for row in declared]

    def say(self, message: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def p95_figures(
    group: str, figures: tuple[str, ...], target_ms: float
) -> Callable[[Context], list[Row]]:
    """The `rows` of a group of reads timed by the asyncio client (bench/loadgen.py): one
    `<figure> p95, ms` row a figure, each with the target `< target_ms`."""

    def rows(ctx: Context) -> list[Row]:
        return p95_rows(ctx.command(group), loadgen.ASYNCIO_CLIENT, figures, target_ms)

    return rows


class RssSampler:
    """Samples VmRSS of a process in a thread while a load runs (the peak is what we keep)."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = memory_kib(self.pid).get("VmRSS")
            if rss:
                self.samples.append(rss)
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mib(self) -> float:
        return max(self.samples, default=0) / 1024
