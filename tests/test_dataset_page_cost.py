"""A dataset's page checks each writer's and reader's edge once, through the real processes.

The page lists its first writers and readers by name and counts them all (`producer_count`,
`consumer_count`), each job counting when its latest run (by the moment asked) had the
edge: a lookup of that run per job. The count once checked every job a second time, in a
subquery of its own: the 20,000 Trino queries writing one table cost 0.4 s of its page
(docs/PERFORMANCE.md, "The bounded reads' regression").
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

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


def test_a_dataset_page_checks_each_job_once(
    pg_server: Server, template_db: str, tmp_path: Path
) -> None:
    log_file = server_log(pg_server)
    with serving(pg_server, template_db, tmp_path, "page-cost") as (url, _, client):
        api = Api(client, NS, DS_NS)
        api.post(_events())
        dataset = api.dataset_id("orders")
        probes, sorts = {}, {}
        explained = tmp_path / "explained"
        explained.mkdir()
        with api_logging_plans(url, log_file, explained) as (logged, served):
            for moment in ({}, {"as_of": "2026-06-02T00:00:00Z"}):
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
    # now: a lookup per job, for the page and its count alike (it was two); as of T the
    # jobs listed also look their run up again, for its state then
    assert probes[False] == WRITERS + READERS, probes
    assert probes[True] <= 2 * (WRITERS + READERS), probes
    # each lookup is the index's first entry for the job, not a sort of its runs
    assert sorts == {False: 0, True: 0}, sorts
