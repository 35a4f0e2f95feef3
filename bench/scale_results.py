"""What a scale run records (docs/scale/results.json): its own module, so that the run
(bench/scale.py) and the report drawn from it (bench/scale_report.py) both import it and
neither imports the other."""

from __future__ import annotations

from pathlib import Path

import msgspec

from bench import scale_storage


class Figure(msgspec.Struct):
    name: str
    unit: str
    value: float | None
    baseline: float | None = None
    baseline_label: str = "-"
    note: str = ""


class Point(msgspec.Struct):
    """Everything measured at one size of the log."""

    events: int
    json_bytes: int
    figures: list[Figure]
    tables: list[scale_storage.TableSize]
    counts: dict[str, int]
    seconds: dict[str, float]  # wall time of each phase of this step
    load: str  # load average after the step
    measured_at: str


class Results(msgspec.Struct):
    command: str
    machine: str
    started: str
    seed: int
    sizes: list[int]
    points: list[Point] = []
    columns: dict[str, dict[str, int]] = {}  # at the largest size: table -> column -> bytes
    indexes: list[tuple[str, str, int]] = []  # at the largest size
    corpus: dict[str, int] = {}  # events by producer kind, plans
    finished: str = ""
    notes: list[str] = []


def load_results(path: Path) -> Results:
    return msgspec.json.decode(path.read_bytes(), type=Results)
