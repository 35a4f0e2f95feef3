"""What a graph's dataset nodes carry costs the same statements however far upstream their
staleness travels, through the real processes.

A chain: `load_seed` FAILs writing `seed`, then `step_1` builds `d1` from `seed`, `step_2`
`d2` from `d1`, and so on to `d12`. Every `d<i>` is at risk (`upstream_failed`, naming the
seed's failed run): the walk upstream from a graph's datasets goes through the inputs of
each one's latest write to the seed, 1 hop from `d2`'s graph and 11 from `d12`'s. The
datasets' statement walks all hops (dataset_nodes.UPSTREAM); it was one statement a hop.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.conftest import Server
from tests.support import (
    Api,
    api_logging_plans,
    plan_nodes,
    run_event,
    server_log,
    serving,
)

NS, DS_NS = "chain", "s3://chain"
PRODUCER = "https://github.com/stackabletech/metastore/tests"
LENGTH = 12


def _run(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/node-details-cost/{label}"))


def _events() -> list[dict[str, Any]]:
    def step(kind: str, hour: int, job: str, inputs: list[str], outputs: list[str]) -> Any:
        return run_event(
            kind,
            f"2026-06-01T{hour:02d}:{30 if kind == 'START' else 40}:00Z",
            PRODUCER,
            (NS, job),
            _run(job),
            [{"namespace": DS_NS, "name": n} for n in inputs],
            [{"namespace": DS_NS, "name": n} for n in outputs],
        )

    events = [
        step("START", 0, "load_seed", [], ["seed"]),
        step("FAIL", 0, "load_seed", [], ["seed"]),
    ]
    for i in range(1, LENGTH + 1):
        source = "seed" if i == 1 else f"d{i - 1}"
        events += [
            step(kind, i, f"step_{i}", [source], [f"d{i}"]) for kind in ("START", "COMPLETE")
        ]
    return events


def test_staleness_upstream_costs_the_same_statements_whatever_the_hops(
    pg_server: Server, template_db: str, tmp_path: Path
) -> None:
    log_file = server_log(pg_server)
    with serving(pg_server, template_db, tmp_path, "node-cost") as (url, _, client):
        Api(client, NS, DS_NS).post(_events())
        ids = {f"d{i}": Api(client, NS, DS_NS).dataset_id(f"d{i}") for i in (2, LENGTH)}
        statements, probes = {}, {}
        explained = tmp_path / "explained"
        explained.mkdir()
        with api_logging_plans(url, log_file, explained) as (logged, served):
            for name, dataset in ids.items():
                for moment in ({}, {"as_of": "2026-06-02T00:00:00Z"}):
                    logged()
                    answer = served.get(
                        "/lineage", params={"node": f"dataset:{dataset}", "depth": 1, **moment}
                    )
                    assert answer.status_code == 200, answer.text
                    plans = logged()
                    statements[name, bool(moment)] = len(plans)
                    probes[name, bool(moment)] = _run_probes(plans)
                    node = next(
                        n for n in answer.json()["nodes"] if n["key"] == f"dataset:{dataset}"
                    )
                    reasons = node["freshness"]["stale_reasons"]
                    assert [(r["reason"], r["run"]["id"]) for r in reasons] == [
                        ("upstream_failed", _run("load_seed"))
                    ], (name, moment)
    # the same statements for a failure 1 hop beyond the graph and 11 hops beyond it
    for as_of in (False, True):
        assert statements["d2", as_of] == statements[f"d{LENGTH}", as_of], statements
        # and no more lineage_runs rows (d2's graph has a node more): as of T the walk
        # upstream reads each hop's writes from run_edges alone (a failed attempt is shown
        # for the graph's datasets only)
        assert probes[f"d{LENGTH}", as_of] <= probes["d2", as_of], probes


def _run_probes(plans: list[dict[str, Any]]) -> int:
    """The lookups of a lineage_runs row by its key in `plans` (plans_logged's)."""
    return sum(
        node.get("Actual Loops", 0)
        for plan in plans
        for node in plan_nodes(plan["Plan"])
        if node.get("Index Name") == "lineage_runs_pkey"
    )
