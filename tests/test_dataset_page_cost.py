"""A dataset's page checks each writer's and reader's edge once, through the real processes.

The page lists its first writers and readers by name and counts them all (`producer_count`,
`consumer_count`), each job counting when its latest run (by the moment asked) had the
edge: as of T a lookup of that run per job, now none (the fold keeps which edges hold now,
job_edges.held_now: 20,000 lookups for the table 20,000 Trino queries wrote). The count
once checked every job a second time, in a subquery of its own: the 20,000 Trino queries
writing one table cost 0.4 s of its page (docs/PERFORMANCE.md, "The bounded reads'
regression"). A graph through the dataset, now, checks its jobs by the same flag.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import Server
from tests.support import Api, api_logging_plans, plan_nodes, run_event, server_log, serving

NS, DS_NS = "page-cost", "s3://page-cost"
PRODUCER = "https://github.com/stackabletech/metastore/tests"
WRITERS, READERS = 12, 5


def _events() -> list[dict[str, Any]]:
    table = [{"namespace": DS_NS, "name": "orders"}]
    events = []
    for i in range(WRITERS + READERS):
        writer = i < WRITERS
        job = f"{'load' if writer else 'report'}_{i:02d}"
        run = str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/page-cost/{job}"))
        for kind, minute in (("START", 0), ("COMPLETE", 5)):
            events.append(
                run_event(
                    kind,
                    f"2026-06-01T{i:02d}:{minute:02d}:00Z",
                    PRODUCER,
                    (NS, job),
                    run,
                    [] if writer else table,
                    table if writer else [],
                )
            )
    return events


def _latest_run_probes(plans: list[dict[str, Any]]) -> int:
    """The lookups of a job's latest run (by lineage_runs_job) in the page's statement."""
    return sum(
        node.get("Actual Loops", 0)
        for plan in plans
        if "readmodel.job_edges e" in plan["Query Text"] and "d.facets" in plan["Query Text"]
        for node in plan_nodes(plan["Plan"])
        if node.get("Index Name") == "lineage_runs_job"
    )


def _sorted_probes(plans: list[dict[str, Any]]) -> int:
    """The sorts over a job's runs found by lineage_runs_job in the page's statement: the
    index orders them as "the latest run at or before T" does (ties by run id) or each
    lookup sorts the job's runs."""
    return sum(
        1
        for plan in plans
        if "readmodel.job_edges e" in plan["Query Text"]
        for node in plan_nodes(plan["Plan"])
        if node["Node Type"] in ("Sort", "Incremental Sort")
        and any(n.get("Index Name") == "lineage_runs_job" for n in node.get("Plans", []))
    )


@contextmanager
def _orders_served(
    pg_server: Server, template_db: str, tmp_path: Path, name: str
) -> Iterator[tuple[str, Callable[[], list[dict[str, Any]]], httpx.Client]]:
    """The `orders` table's id, and an API on a store of its writers and readers whose
    plans `logged()` gives (tests.support.api_logging_plans)."""
    log_file = server_log(pg_server)
    with serving(pg_server, template_db, tmp_path, name) as (url, _, client):
        api = Api(client, NS, DS_NS)
        api.post(_events())
        dataset = api.dataset_id("orders")
        explained = tmp_path / "explained"
        explained.mkdir()
        with api_logging_plans(url, log_file, explained) as (logged, served):
            yield dataset, logged, served


# Now, and as of a moment after every event.
MOMENTS: tuple[dict[str, str], ...] = ({}, {"as_of": "2026-06-02T00:00:00Z"})


def test_a_dataset_page_checks_each_job_once(
    pg_server: Server, template_db: str, tmp_path: Path
) -> None:
    probes, sorts = {}, {}
    with _orders_served(pg_server, template_db, tmp_path, "page-cost") as (dataset, logged, served):
        for moment in MOMENTS:
            logged()
            answer = served.get(f"/datasets/{dataset}", params=moment)
            assert answer.status_code == 200, answer.text
            page = answer.json()
            assert (page["producer_count"], page["consumer_count"]) == (WRITERS, READERS)
            assert len(page["producers"]) == WRITERS
            assert len(page["consumers"]) == READERS
            plans = logged()
            probes[bool(moment)] = _latest_run_probes(plans)
            sorts[bool(moment)] = _sorted_probes(plans)
    # now: no lookup, the fold's job_edges.held_now says which jobs hold (it was one a job,
    # and before that two); as of T a lookup per job, for the page and its count alike,
    # and the jobs listed look their run up again, for its state then
    assert probes[False] == 0, probes
    assert WRITERS + READERS <= probes[True] <= 2 * (WRITERS + READERS), probes
    # each lookup is the index's first entry for the job, not a sort of its runs
    assert sorts == {False: 0, True: 0}, sorts


def _run_probes(plans: list[dict[str, Any]]) -> int:
    """The lookups of a job's latest run (by lineage_runs_job) in a request's statements."""
    return sum(
        node.get("Actual Loops", 0)
        for plan in plans
        for node in plan_nodes(plan["Plan"])
        if node.get("Index Name") == "lineage_runs_job"
    )


MAX_NODES = 4


def test_a_graph_now_looks_up_no_run_of_the_jobs_a_dataset_reaches(
    pg_server: Server, template_db: str, tmp_path: Path
) -> None:
    probes = {}
    with _orders_served(pg_server, template_db, tmp_path, "graph-cost") as (
        dataset,
        logged,
        served,
    ):
        for moment in MOMENTS:
            logged()
            params = {"node": f"dataset:{dataset}", "depth": 1, "max_nodes": MAX_NODES}
            answer = served.get("/lineage", params=params | moment)
            assert answer.status_code == 200, answer.text
            graph = answer.json()
            assert graph["truncated"] is True
            assert len(graph["nodes"]) == MAX_NODES, graph
            probes[bool(moment)] = _run_probes(logged())
    # now: the jobs kept look up their runs for their own edges (their inputs and outputs,
    # the run's edges), none of the 17 the dataset reaches (37 before job_edges.held_now);
    # as of T each of the 17 is checked
    assert probes[False] <= 2 * (MAX_NODES - 1), probes
    assert probes[True] >= WRITERS + READERS, probes
