"""/lineage/runs stays within `max_nodes` and the answer cap (issue 46).

A load run writes `seed`; four runs read it and write 2,000 datasets each. Downstream of
the load run, the answer used to draw every dataset the four leaves wrote (8,000 nodes,
`truncated: false`); it now counts runs and datasets against `max_nodes` and says it
stopped short. Events go into the log the way ingest puts them there, the real projector
folds them, and a real `metastore api` process answers over HTTP.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from metastore.api import limits
from metastore.api.run_lineage import READERS, WRITERS
from tests.apiserver import scenario_api
from tests.support import run_event

NS, DS_NS = "wide", "s3://wide"
PRODUCER = "https://github.com/stackabletech/metastore/tests"
WIDE_RUNS, OUTPUTS = 4, 2_000


def run_id(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/run-lineage-bounded/{label}"))


def dataset(name: str) -> dict[str, Any]:
    return {"namespace": DS_NS, "name": name}


def events() -> list[dict[str, Any]]:
    def complete(when: str, job: str, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
        return run_event("COMPLETE", when, PRODUCER, (NS, job), run_id(job), inputs, outputs)

    found = [
        run_event("START", "2026-03-01T00:00:00Z", PRODUCER, (NS, "load"), run_id("load"), [], []),
        complete("2026-03-01T00:10:00Z", "load", [], [dataset("seed")]),
    ]
    for w in range(WIDE_RUNS):
        job = f"fan_{w}"
        outputs = [dataset(f"out_{w}_{i:05d}") for i in range(OUTPUTS)]
        found += [
            run_event("START", "2026-03-01T01:00:00Z", PRODUCER, (NS, job), run_id(job), [], []),
            complete("2026-03-01T01:30:00Z", job, [dataset("seed")], outputs),
        ]
    return found


@pytest.fixture(scope="module")
def served(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, str]]:
    log_dir = tmp_path_factory.mktemp("wide")
    with (
        scenario_api(pg_server, template_db, log_dir, events()) as (url, database_url),
        httpx.Client(base_url=url + "/api/v1", timeout=30) as client,
    ):
        yield client, database_url


def downstream(client: httpx.Client, **params: Any) -> tuple[dict[str, Any], int]:
    answer = client.get(
        "/lineage/runs", params={"run_id": run_id("load"), "direction": "downstream", **params}
    )
    assert answer.status_code == 200, answer.text
    return answer.json(), len(answer.content)


@pytest.mark.parametrize("max_nodes", [limits.NODE_LIMIT, 50])
def test_a_wide_run_graph_stays_within_max_nodes(
    served: tuple[httpx.Client, str], max_nodes: int
) -> None:
    client, _ = served
    graph, size = downstream(client, max_nodes=max_nodes)
    assert graph["truncated"] is True
    assert len(graph["nodes"]) + len(graph["datasets"]) <= max_nodes
    assert size < limits.MAX_ANSWER_BYTES
    # the runs come first: the load run and the four that read its write
    runs = {n["id"] for n in graph["nodes"]}
    assert runs == {run_id("load"), *(run_id(f"fan_{w}") for w in range(WIDE_RUNS))}
    assert {(e["from"]["id"], e["dataset"]["name"]) for e in graph["edges"]} == {
        (run_id("load"), "seed")
    }
    # then the datasets, the load run's first; every dataset edge names a drawn dataset
    drawn = {d["id"] for d in graph["datasets"]}
    names = {d["name"] for d in graph["datasets"]}
    assert "seed" in names
    assert len(drawn) == max_nodes - len(runs)
    assert graph["dataset_edges"]
    assert {e["dataset"]["id"] for e in graph["dataset_edges"]} == drawn
    assert len(graph["dataset_edges"]) <= limits.EDGE_LIMIT


def test_the_run_walk_stops_at_the_edges_it_may_visit(served: tuple[httpx.Client, str]) -> None:
    _, database_url = served
    args = {"runs": [uuid.UUID(run_id("load"))]}
    with psycopg.connect(database_url) as conn:
        found = conn.execute(READERS[False], {**args, "visit_limit": 3}).fetchall()
        everything = conn.execute(READERS[False], {**args, "visit_limit": 10**6}).fetchall()
    # one output looked at and two of its readers: capped, short of the four
    assert found[0][:2] == (3, True) and len(found) == 2
    assert everything[0][:2] == (1 + WIDE_RUNS, False) and len(everything) == WIDE_RUNS
    # upstream of a fan run: its one input looked at, and its writer, the load run
    fan = {"runs": [uuid.UUID(run_id("fan_0"))]}
    with psycopg.connect(database_url) as conn:
        (capped,) = conn.execute(WRITERS[False], {**fan, "visit_limit": 1}).fetchall()
        (whole,) = conn.execute(WRITERS[False], {**fan, "visit_limit": 10**6}).fetchall()
    assert capped[:2] == (1, True) and whole[:2] == (1, False)
    assert str(capped[4]) == str(whole[4]) == run_id("load")
