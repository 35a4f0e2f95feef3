"""Generated run histories of known cadence, with the next run on time, late or missed.

Each history is one job's OpenLineage events (START and COMPLETE of each run, writing one
dataset), ending before a moment `at` at which the truth is known:
- `on_time`: the next run starts one second after `at` (the worst moment for a false alarm);
- `late`: the next run has not started a quarter period past its latest usual start;
- `missed`: nor has the one after it, a quarter period past its own.
Hourly, daily and weekly jobs carry nominalTime (their runs start a little after it, by a
jitter drawn per job); irregular ones do not, and start after gaps drawn between 2 and 10
hours. A history leaves out MISSING_SHARE of its past runs (a past outage) to be realistic.
Used by tests/test_lateness.py and bench/lateness_rates.py (docs/LATENESS.md).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import uuid
from typing import Any, Literal

Cadence = Literal["hourly", "daily", "weekly", "irregular"]
Truth = Literal["on_time", "late", "missed"]
CADENCES: tuple[Cadence, ...] = ("hourly", "daily", "weekly", "irregular")
PERIODS = {"hourly": 3600.0, "daily": 86400.0, "weekly": 604800.0}
# The start's jitter after the nominal time, up to a share of the period drawn per job
# (hourly: up to 2-6 minutes; daily up to 48 min-2.4 h; weekly 5.6-16.8 h).
JITTER_SHARE = (0.02, 0.06)
BASE_DELAY = 30.0  # seconds: a scheduler's start-up
IRREGULAR_GAPS = (2 * 3600.0, 10 * 3600.0)
MISSING_SHARE = 0.03
RUNS = 40
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/airflow"
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


@dataclasses.dataclass(frozen=True)
class History:
    namespace: str
    job: str
    dataset: str
    cadence: Cadence
    truth: Truth
    at: dt.datetime  # the moment the truth holds
    events: list[dict[str, Any]]
    starts: list[dt.datetime]  # of the runs in the history, oldest first
    states: list[str]  # their final states


def _time(when: dt.datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _run_events(
    namespace: str,
    job: str,
    dataset: str,
    start: dt.datetime,
    nominal: dt.datetime | None,
    seconds: float,
    state: str,
    rng: random.Random,
) -> list[dict[str, Any]]:
    run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    facets: dict[str, Any] = {}
    if nominal is not None:
        facets["nominalTime"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json",
            "nominalStartTime": _time(nominal),
        }
    output = {"namespace": "s3://warehouse", "name": dataset}
    common = {
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT,
        "job": {"namespace": namespace, "name": job},
        "inputs": [],
    }
    return [
        {
            **common,
            "eventType": "START",
            "eventTime": _time(start),
            "run": {"runId": run_id, "facets": facets},
            "outputs": [output],
        },
        {
            **common,
            "eventType": state,
            "eventTime": _time(start + dt.timedelta(seconds=seconds)),
            "run": {"runId": run_id, "facets": {}},
            "outputs": [output],
        },
    ]


def history(
    cadence: Cadence,
    truth: Truth,
    end: dt.datetime,
    rng: random.Random,
    namespace: str = "airflow://cadences",
    name: str | None = None,
    runs: int = RUNS,
    fail_share: float = 0.0,
) -> History:
    """A job's history of `runs` slots whose truth holds at about `end` (`at` <= `end`)."""
    job = name or f"{cadence}_{truth}_{rng.getrandbits(32):08x}"
    dataset = f"warehouse.{job}"
    if cadence == "irregular":
        gaps = [rng.uniform(*IRREGULAR_GAPS) for _ in range(runs + 2)]
        jitter = 0.0
        longest = IRREGULAR_GAPS[1]
    else:
        period = PERIODS[cadence]
        gaps = [period] * (runs + 2)
        jitter = rng.uniform(*JITTER_SHARE) * period
        longest = period
    # Slots oldest first; the last two are the next run and the one after it.
    offsets = [0.0]
    for gap in gaps[1:]:
        offsets.append(offsets[-1] + gap)
    delays = [BASE_DELAY + rng.uniform(0, jitter) for _ in offsets]
    quarter = longest / 4
    if truth == "on_time":
        at_offset = offsets[runs] + delays[runs] - 1.0
    elif truth == "late":
        at_offset = offsets[runs - 1] + longest + BASE_DELAY + jitter + quarter
    else:
        at_offset = offsets[runs - 1] + 2 * longest + BASE_DELAY + jitter + quarter
    origin = end - dt.timedelta(seconds=at_offset)
    at = end
    events: list[dict[str, Any]] = []
    starts: list[dt.datetime] = []
    states: list[str] = []
    for index in range(runs):
        if 0 < index < runs - 1 and rng.random() < MISSING_SHARE:
            continue  # a past outage: the slot has no run
        slot = origin + dt.timedelta(seconds=offsets[index])
        start = slot + dt.timedelta(seconds=delays[index])
        state = "FAIL" if rng.random() < fail_share else "COMPLETE"
        seconds = 60 + rng.uniform(0, 240)
        nominal = slot if cadence != "irregular" else None
        events += _run_events(namespace, job, dataset, start, nominal, seconds, state, rng)
        starts.append(start)
        states.append(state)
    return History(namespace, job, dataset, cadence, truth, at, events, starts, states)
