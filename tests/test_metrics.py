"""`GET /metrics` of a real `metastore api`, scraped the way Prometheus does."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support import running
from tests.test_export import FEED, append, run_event


def scrape(
    base_url: str, timeout: float = 5.0
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    answer = httpx.get(base_url + "/metrics", timeout=timeout)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_count_requests_events_and_the_log(database_url: str, tmp_path: Path) -> None:
    append(database_url, [run_event(i) for i in range(5)])  # already in the log at start
    env = {
        "METASTORE_POOL_SIZE": "3",
        "METASTORE_EXPORT_TOKENS": "x",
        "METASTORE_INGEST_TOKENS": "i",
        "METASTORE_READ_TOKENS": "r",
    }
    ingest = {"Authorization": "Bearer i"}
    with running("api", database_url, tmp_path, env=env) as api:
        for event in (run_event(10), run_event(11), run_event(10)):  # the last is a retry
            answer = httpx.post(api.base_url + "/ingest/openlineage", json=event, headers=ingest)
            assert answer.is_success
        assert httpx.post(
            api.base_url + "/ingest/openlineage", json={"eventType": "START"}, headers=ingest
        ).status_code in (400, 422)
        page = httpx.get(api.base_url + FEED, headers={"Authorization": "Bearer x"}).json()
        assert len(page["events"]) == 7
        httpx.get(api.base_url + FEED)  # 401
        httpx.get(api.base_url + "/nowhere")  # 404
        read = {"Authorization": "Bearer r"}
        assert httpx.get(api.base_url + "/api/v1/namespaces", headers=read).status_code == 200
        samples = scrape(api.base_url)
    # ingest, by outcome
    assert value(samples, "metastore_ingest_events_total", outcome="stored") == 2
    assert value(samples, "metastore_ingest_events_total", outcome="duplicate") == 1
    assert value(samples, "metastore_ingest_events_total", outcome="invalid") == 1
    assert value(samples, "metastore_ingest_payload_bytes_count") >= 3
    assert value(samples, "metastore_group_commit_events_sum") >= 2
    # request latency, by route template and status
    duration = "metastore_http_request_duration_seconds_count"
    assert value(samples, duration, method="GET", route=FEED, status="200") == 1
    assert value(samples, duration, method="GET", route="/export/*", status="401") == 1
    assert value(samples, duration, method="GET", route="unmatched", status="404") == 1
    assert value(samples, duration, method="GET", route="/api/v1/namespaces", status="200") == 1
    posts = sum(
        v
        for (name, labels), v in samples.items()
        if name == duration and ("route", "/ingest/openlineage") in labels
    )
    assert posts == 4
    # the log and the export feed
    assert value(samples, "metastore_log_events") == 7
    assert value(samples, "metastore_log_bytes") > 0
    assert value(samples, "metastore_export_events_total", format="json") == 7
    # the pools: the API's (METASTORE_POOL_SIZE) and the group committer's
    assert value(samples, "metastore_db_pool_max_connections", pool="api") == 3
    assert 1 <= value(samples, "metastore_db_pool_connections", pool="api") <= 3
    assert value(samples, "metastore_db_pool_requests_waiting", pool="api") == 0
    assert value(samples, "metastore_db_pool_max_connections", pool="ingest") == 3
    assert 2 <= value(samples, "metastore_db_pool_connections", pool="ingest") <= 3


def test_every_declared_family_is_exposed(database_url: str, tmp_path: Path) -> None:
    with running("api", database_url, tmp_path) as api:
        text = httpx.get(api.base_url + "/metrics").text
    families = {family.name for family in text_string_to_metric_families(text)}
    for name in (
        "metastore_ingest_requests",
        "metastore_ingest_events",
        "metastore_ingest_payload_bytes",
        "metastore_group_commit_events",
        "metastore_http_request_duration_seconds",
        "metastore_log_events",
        "metastore_projection_lag_events",
        "metastore_projection_lag_seconds",
        "metastore_projection_stalled",
        "metastore_projection_dead_letters",
        "metastore_projector_lease_held",
        "metastore_projector_leader",
        "metastore_projector_folded_events",
        "metastore_projector_dead_letters",
        "metastore_projector_malformed_facets",
        "metastore_db_pool_connections_in_use",
        "metastore_export_waiting_requests",
    ):
        assert name in families, name
