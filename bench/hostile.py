"""Events that stalled, starved or crashed the projector (issue 34), made to measure.

Used by `python -m bench.scenario hostile-fold` (each case's time and memory), the
`hostile` benchmark group and tests/reliability/test_hostile_fold.py. Every event is one
ingest accepts.
"""

from __future__ import annotations

import random
import string
import uuid
from typing import Any

PRODUCER = "https://example.com/hostile-fold"
TIME = "2024-05-01T10:00:00.000Z"


def run_event(run_id: str, job: str = "job", **extra: Any) -> dict[str, Any]:
    return {
        "eventType": "START",
        "eventTime": TIME,
        "run": {"runId": run_id, "facets": {}},
        "job": {"namespace": "hostile", "name": job},
        "inputs": [],
        "outputs": [],
        "producer": PRODUCER,
        "schemaURL": PRODUCER,
        **extra,
    }


def run_id(prefix: str, i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, f"{prefix}:{i}"))


def parent_facet(parent: str) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": PRODUCER,
        "run": {"runId": parent},
        "job": {"namespace": "hostile", "name": "parent"},
    }


def parent_chain(n: int, cycle: bool = False, prefix: str = "chain") -> list[dict[str, Any]]:
    """Run i names run i+1 as its parent (the child comes first in the log); with `cycle`
    the last names the first. Run i's id is chain_run(i, prefix)."""
    events = []
    for i in range(n):
        event = run_event(chain_run(i, prefix), prefix)
        if i + 1 < n or cycle:
            event["run"]["facets"]["parent"] = parent_facet(chain_run((i + 1) % n, prefix))
        events.append(event)
    return events


def chain_run(i: int, prefix: str = "chain") -> str:
    return run_id(prefix, i)


def output(name: str, **facets: Any) -> dict[str, Any]:
    return {"namespace": "s3://hostile", "name": name, "facets": facets}


def symlinks(*names: str) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": PRODUCER,
        "identifiers": [{"namespace": "s3://hostile", "name": n, "type": "TABLE"} for n in names],
    }


def merge_chain(n: int) -> list[dict[str, Any]]:
    """n datasets, then n-1 events each naming dataset i with dataset i-1 as a symlink,
    newest first: each merges everything joined so far into an older dataset."""
    events = [run_event(run_id("merge", i), "merge", outputs=[output(f"t{i}")]) for i in range(n)]
    for i in range(n - 1, 0, -1):
        ref = output(f"t{i}", symlinks=symlinks(f"t{i - 1}"))
        events.append(run_event(run_id("merge-join", i), "merge", outputs=[ref]))
    return events


def column_lineage(fields: int, prefix: str = "c") -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": PRODUCER,
        "fields": {
            f"{prefix}{i}": {
                "inputFields": [{"namespace": "s3://in", "name": "in/t", "field": f"s{i}"}]
            }
            for i in range(fields)
        },
    }


def wide_lineage(count: int, fields: int, prefix: str = "wide") -> list[dict[str, Any]]:
    """`count` runs each writing one output whose `columnLineage` has `fields` fields (of
    one input field each): about 90 bytes a field."""
    return [
        run_event(
            run_id(prefix, i),
            f"{prefix}-{i}",
            eventType="COMPLETE",
            outputs=[output(f"{prefix}/{i}", columnLineage=column_lineage(fields))],
        )
        for i in range(count)
    ]


def wide_schema(fields: int, events: int = 1) -> list[dict[str, Any]]:
    """`events` runs each writing a dataset whose `schema` facet has `fields` fields (each
    event's its own: a schema repeated is worked out once)."""
    return [
        run_event(
            run_id("schema", e),
            "schema",
            outputs=[
                output(
                    f"schema{e}",
                    schema={
                        "_producer": PRODUCER,
                        "_schemaURL": PRODUCER,
                        "fields": [{"name": f"f{e}.{i}", "type": "string"} for i in range(fields)],
                    },
                )
            ],
        )
        for e in range(events)
    ]


def many_outputs(count: int, events: int = 1) -> list[dict[str, Any]]:
    return [
        run_event(
            run_id("outputs", e),
            "outputs",
            outputs=[{"namespace": "s3://o", "name": f"o{e}.{i}"} for i in range(count)],
        )
        for e in range(events)
    ]


def long_text(size: int, seed: int) -> str:
    """Letters and digits that do not compress, as an index key would hold them."""
    return "".join(random.Random(seed).choices(string.ascii_letters + string.digits, k=size))


def long_keys() -> list[dict[str, Any]]:
    """The three of the issue, each beside an ordinary output."""
    plain = {"namespace": "s3://plain", "name": "plain"}
    names = {
        "fields": {
            "a": {
                "inputFields": [
                    {"namespace": long_text(1000, 6), "name": long_text(1000, 1), "field": "f"}
                ]
            }
        },
        "_producer": PRODUCER,
        "_schemaURL": PRODUCER,
    }
    field = {
        "fields": {
            long_text(5000, 2): {
                "inputFields": [{"namespace": "s3://in", "name": "t", "field": long_text(5000, 3)}]
            }
        },
        "_producer": PRODUCER,
        "_schemaURL": PRODUCER,
    }
    catalog = {
        "_producer": PRODUCER,
        "_schemaURL": PRODUCER,
        "name": "lakehouse",
        "metadataUri": "thrift://" + long_text(4000, 4) + ":9083",
        "framework": "hive",
        "type": "hive",
    }
    return [
        run_event(
            run_id("keys", 0),
            "long-names",
            outputs=[
                plain,
                {
                    "namespace": long_text(1000, 7),
                    "name": long_text(1000, 5),
                    "facets": {"columnLineage": names},
                },
            ],
        ),
        run_event(
            run_id("keys", 1), "long-field", outputs=[plain, output("f", columnLineage=field)]
        ),
        run_event(
            run_id("keys", 2),
            "long-uri",
            outputs=[
                plain,
                {
                    "namespace": "trino://t:8080",
                    "name": "lakehouse.s.t",
                    "facets": {"catalog": catalog},
                },
            ],
        ),
    ]


def reused_run_ids(pairs: int) -> list[dict[str, Any]]:
    """Two jobs, one runId, the same output: `pairs` times, in one batch."""
    events = []
    for i in range(pairs):
        rid = run_id("reused", i)
        for job in ("a", "b"):
            events.append(run_event(rid, f"reused-{job}", outputs=[output(f"reused/{i}")]))
    return events
