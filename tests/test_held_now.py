"""The fold keeps which job edges hold now (job_edges.held_now), so reads without `as_of` look
up no job's latest run: the flag must say exactly what the as-of rule says at asof.NOW (the
job's latest run by start, its static lineage), after every batch, whatever the order the
events arrive in. Through the real fold on a real PostgreSQL; the reads that use it answer
the same as as of now (tests/test_now_is_as_of_now.py) and look up no run per job
(tests/test_dataset_page_cost.py)."""

from __future__ import annotations

import random
import uuid
from typing import Any

import psycopg

from metastore.api import asof
from projections.runner import catch_up
from tests.logdata import append
from tests.support import run_event

Conn = psycopg.Connection[Any]
PRODUCER = "https://github.com/stackabletech/metastore/tests"
JOB_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"
JOB = ("held-now", "load_orders")
NS = "s3://held-now"

# Each row's flag beside the rule the as-of reads apply (EDGE_HELD at asof.NOW).
FLAG_AND_RULE = f"""
SELECT e.direction, e.name, e.source, e.held_now, {asof.edge_held()}
FROM readmodel.job_edges e JOIN readmodel.jobs j ON j.id = e.job_id
WHERE j.namespace = %(namespace)s
ORDER BY 1, 2, 3"""


def _run(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/held-now/{name}"))


def _ds(name: str) -> dict[str, Any]:
    return {"namespace": NS, "name": name}


def _events() -> list[dict[str, Any]]:
    """Runs of one job whose outputs change: r1 writes `daily_1`, r2 (started later)
    `daily_2`, r0 (started before both, reported last) `daily_0`; r3, the latest, STARTs
    naming only its input and COMPLETEs naming `daily_3`, while r4 starting before it
    FAILs writing `daily_4`; r5 (below). A JobEvent declares `ref_data` as static lineage."""

    def run(name: str, day: int, outputs: list[str], end: str = "COMPLETE") -> list[Any]:
        start = f"2026-03-{day:02d}T10:00:00Z"
        return [
            run_event("START", start, PRODUCER, JOB, _run(name), [_ds("raw")], []),
            run_event(
                end,
                f"2026-03-{day:02d}T11:00:00Z",
                PRODUCER,
                JOB,
                _run(name),
                [_ds("raw")],
                [_ds(o) for o in outputs],
            ),
        ]

    static = {
        "eventTime": "2026-03-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": JOB_EVENT,
        "job": {"namespace": JOB[0], "name": JOB[1]},
        "inputs": [_ds("ref_data")],
        "outputs": [],
    }
    # r5's COMPLETE comes first, the latest run until its START, reported last, says it
    # started before all the others: r3 is the latest again, its edges held again
    r5_start, r5_complete = run("r5", 6, ["daily_5"])
    r5_start["eventTime"] = "2026-02-28T10:00:00Z"
    return [
        *run("r1", 2, ["daily_1"]),
        *run("r2", 3, ["daily_2"]),
        static,
        *run("r0", 1, ["daily_0"]),
        *run("r4", 4, ["daily_4"], end="FAIL"),
        *run("r3", 5, ["daily_3"]),
        r5_complete,
        r5_start,
    ]


def _flags(conn: Conn) -> list[Any]:
    params = {"namespace": JOB[0], "as_of": asof.NOW, "since": None}
    return conn.execute(FLAG_AND_RULE, params).fetchall()


def _held(conn: Conn) -> set[tuple[str, str]]:
    return {(direction, name) for direction, name, _, held, _ in _flags(conn) if held}


def test_held_now_is_the_as_of_rule_after_every_batch(conn: Conn) -> None:
    events = _events()
    held_after = []
    for event in events:  # one event a batch, in the order above
        append(conn, [event])
        catch_up(conn)
        flags = _flags(conn)
        assert all(flag == rule for *_, flag, rule in flags), flags
        held_after.append(_held(conn))
    # r2 replaced r1's output; r0, reported late, changed nothing held; r3's START let
    # go of r4's attempted output, its COMPLETE holds its own; static lineage always holds
    assert held_after[3] == {("input", "raw"), ("output", "daily_2")}
    assert held_after[4] == held_after[3] | {("input", "ref_data")}
    assert held_after[6] == held_after[4]
    assert held_after[8] == {("input", "raw"), ("input", "ref_data"), ("output", "daily_4")}
    assert held_after[9] == {("input", "raw"), ("input", "ref_data")}
    assert held_after[10] == held_after[9] | {("output", "daily_3")}
    assert held_after[11] == held_after[9] | {("output", "daily_5")}
    assert held_after[12] == held_after[10]


def test_held_now_whatever_the_order_and_the_batches(conn: Conn) -> None:
    events = _events()
    random.Random(20261206).shuffle(events)
    append(conn, events[:5])
    catch_up(conn, limit=2)
    append(conn, events[5:])
    catch_up(conn)
    flags = _flags(conn)
    assert all(flag == rule for *_, flag, rule in flags), flags
    assert _held(conn) == {("input", "raw"), ("input", "ref_data"), ("output", "daily_3")}
