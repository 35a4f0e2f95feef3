"""The false-alarm and miss rates of lateness learned from history (docs/LATENESS.md).

    python -m bench.lateness_rates                 # 100 histories per cadence and truth
    python -m bench.lateness_rates --per-case 20   # quicker

Generates histories of known cadence whose next run is on time, late or missed at a known
moment (bench/cadences.py), loads them into a throwaway PostgreSQL's log, folds them with
the projector's code (the cadence each job gets is the one `metastore projector` would
learn) and judges each job's stored cadence at its history's moment by the rule the API
applies (api/lateness.py): missed past `missed_at`, late past `late_at`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import time
from collections import Counter

import psycopg

from bench.cadences import CADENCES, History, Truth, history
from bench.datagen import to_record
from bench.harness import cluster, copy_records
from projections.runner import catch_up

TRUTHS: tuple[Truth, ...] = ("on_time", "late", "missed")
READ = """
SELECT j.name, k.cadence, k.late_at, k.missed_at
FROM readmodel.jobs j LEFT JOIN readmodel.job_cadence k ON k.job_id = j.id
"""


def judged(at: dt.datetime, late_at: dt.datetime | None, missed_at: dt.datetime | None) -> str:
    """The status the API answers at `at` (`unknown`: no cadence learned)."""
    if late_at is None or missed_at is None:
        return "unknown"
    return "missed" if at >= missed_at else "late" if at >= late_at else "on_time"


def measure(per_case: int, seed: int) -> str:
    rng = random.Random(seed)
    end = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    histories: dict[str, History] = {}
    for cadence in CADENCES:
        for truth in TRUTHS:
            for _ in range(per_case):
                story = history(cadence, truth, end, rng)
                histories[story.job] = story
    events = [e for h in histories.values() for e in h.events]
    started = time.perf_counter()
    with cluster("lateness") as server:
        url = server.database()
        copy_records(url, (to_record(json.dumps(e).encode()) for e in events))
        catch_up(url)
        with psycopg.connect(url) as conn:
            stored = {r[0]: r[1:] for r in conn.execute(READ).fetchall()}
    seconds = time.perf_counter() - started
    outcomes: dict[tuple[str, str], Counter[str]] = {}
    recognised: Counter[str] = Counter()
    for name, story in histories.items():
        cadence, late_at, missed_at = stored[name]
        outcomes.setdefault((story.cadence, story.truth), Counter())[
            judged(story.at, late_at, missed_at)
        ] += 1
        recognised[story.cadence] += cadence == story.cadence
    lines = [
        f"{len(histories)} histories ({per_case} per cadence and truth, seed {seed}), "
        f"{len(events)} events, loaded and folded in {seconds:.0f} s",
        "",
        "| cadence | cadence recognised | false alarms (on time judged late or missed) "
        "| late not judged late | missed not judged missed |",
        "|---|---|---|---|---|",
    ]
    for cadence in CADENCES:
        on_time = outcomes[(cadence, "on_time")]
        late = outcomes[(cadence, "late")]
        missed = outcomes[(cadence, "missed")]
        alarms = on_time["late"] + on_time["missed"]
        late_missed = per_case - late["late"] - late["missed"]
        missed_missed = per_case - missed["missed"]
        lines.append(
            f"| {cadence} | {recognised[cadence]}/{3 * per_case} "
            f"| {alarms}/{per_case} ({100 * alarms / per_case:.1f} %) "
            f"| {late_missed}/{per_case} ({100 * late_missed / per_case:.1f} %) "
            f"| {missed_missed}/{per_case} ({100 * missed_missed / per_case:.1f} %) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-case", type=int, default=100)
    parser.add_argument("--seed", type=int, default=45)
    args = parser.parse_args(argv)
    print(measure(args.per_case, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
