"""One shape for one thing, over HTTP against the conformance scenarios: a run node in
run lineage carries the same times as a run elsewhere, a stored event is typed, roles
have one vocabulary, and so on (issue 48, item 5)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.apiserver import scenario_api

COMPOSE_RUN = "01936898-5bd1-7511-9abf-a140907e6cb3"  # Airflow gcs_hook.compose_task: 5 runs


@pytest.fixture(scope="module")
def api(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    folder = tmp_path_factory.mktemp("shapes")
    with (
        scenario_api(pg_server, template_db, folder) as (url, _),
        httpx.Client(base_url=url + "/api/v1", timeout=30) as client,
    ):
        yield client


def get(api: httpx.Client, path: str, **params: Any) -> Any:
    response = api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_run_node_has_the_times_of_the_run(api: httpx.Client) -> None:
    """A run in run lineage carries its state time and duration, the same as /runs/{id}."""
    graph = get(api, "/lineage/runs", run_id=COMPOSE_RUN, direction="both", depth=3)
    assert len(graph["nodes"]) > 1, graph["nodes"]
    for node in graph["nodes"]:
        run = get(api, f"/runs/{node['id']}")
        shared = ("state", "state_time", "started_at", "ended_at", "duration_seconds")
        assert {k: node[k] for k in shared} == {k: run[k] for k in shared}
    assert any(node["duration_seconds"] is not None for node in graph["nodes"])
