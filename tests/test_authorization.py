"""Authorization through a real `metastore api`, decided by a real policy engine (the
chart's Rego behind a test OPA, tests/opa_server.py) or by the chart values' policy file:
ingest bound to namespaces (a batch refused whole, nothing appended), the export feed's
permission, and OPA slow, down and answering undefined."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.opa_server import OpaServer, opa_server
from tests.support import Process, run_event, running
from tests.test_export import FEED

SPARK = "spark-sales"
WAREHOUSE = "s3a://warehouse"
TRINO = "trino://trino-coordinator:8443"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/spark"

POLICY: dict[str, Any] = {
    "admins": ["group:platform"],
    "read": [{"subjects": ["group:sales"], "namespaces": [SPARK, "s3a://warehouse*"]}],
    "write": [
        {"subjects": ["spark-sales"], "namespaces": [SPARK, "s3a://warehouse*"]},
        {"subjects": ["group:trino"], "namespaces": ["trino://*"]},
    ],
    "export": ["exporter"],
}
# name: (scopes, groups)
PRINCIPALS = {
    "spark-sales": (["ingest"], []),
    "trino-etl": (["ingest"], ["trino"]),
    "exporter": (["export"], []),
    "alice": (["read", "export"], ["sales"]),
    "root": (["ingest", "read", "export"], ["platform"]),
}


def token(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer token-of-{name}"}


def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    named = [
        {"name": name, "scopes": scopes, "token": f"token-of-{name}", "groups": groups}
        for name, (scopes, groups) in PRINCIPALS.items()
    ]
    path.write_text(json.dumps(named))
    return path


def policy_env(tmp_path: Path, **opa: str) -> dict[str, str]:
    """The api's environment: named tokens, and OPA's URL (+ settings) or the policy file."""
    env = {"METASTORE_AUTH": "enabled", "METASTORE_TOKENS_FILE": str(tokens_file(tmp_path))}
    if opa:
        return env | opa
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    return env | {"METASTORE_POLICY_FILE": str(path)}


def event(n: int, job_namespace: str, *outputs: str) -> dict[str, Any]:
    return run_event(
        "COMPLETE",
        f"2026-12-01T10:00:{n:02d}Z",
        PRODUCER,
        (job_namespace, f"job_{n}"),
        str(uuid.UUID(int=n + 1)),
        [],
        [{"namespace": ns, "name": f"table_{n}"} for ns in outputs],
    )


def dataset_event(n: int, namespace: str) -> dict[str, Any]:
    return {
        "eventTime": f"2026-12-01T11:00:{n:02d}Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": namespace, "name": f"table_{n}"},
    }


def ingest(
    api: Process, n: int, job_namespace: str, *outputs: str, by: str = SPARK
) -> httpx.Response:
    """One run event posted to the ingest path with `by`'s token."""
    return httpx.post(
        api.base_url + "/ingest/openlineage",
        json=event(n, job_namespace, *outputs),
        headers=token(by),
        timeout=30,
    )


def logged_run_ids(api: Process) -> list[str]:
    answer = httpx.get(api.base_url + FEED, headers=token("root"), timeout=30)
    assert answer.status_code == 200, answer.text
    return [e["run"]["runId"] for e in answer.json()["events"] if "run" in e]


def metric(api: Process, line_start: str) -> float:
    text = httpx.get(api.base_url + "/metrics", timeout=30).text
    values = [
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)
    ]
    return sum(values)


@pytest.fixture
def opa() -> Iterator[OpaServer]:
    with opa_server(POLICY) as server:
        yield server


@pytest.fixture(params=["opa", "policy-file"])
def api(request: pytest.FixtureRequest, database_url: str, tmp_path: Path) -> Iterator[Process]:
    """The api deciding by OPA over the chart's Rego, or by the values' policy file."""
    if request.param == "opa":
        server = request.getfixturevalue("opa")
        env = policy_env(tmp_path, METASTORE_OPA_URL=server.url)
    else:
        env = policy_env(tmp_path)
    with running("api", database_url, tmp_path, env=env) as process:
        yield process


def test_ingest_refuses_whole_what_writes_a_namespace_it_may_not(api: Process) -> None:
    post = httpx.Client(base_url=api.base_url, timeout=30)
    allowed = post.post(
        "/ingest/openlineage", json=event(1, SPARK, WAREHOUSE), headers=token(SPARK)
    )
    assert allowed.status_code == 200, allowed.text

    # One element writes Trino's namespace, another is Trino's dataset: the batch is refused
    # whole, each place named, and the allowed element is not stored either.
    batch = [event(2, SPARK, WAREHOUSE), event(3, SPARK, WAREHOUSE, TRINO), dataset_event(4, TRINO)]
    refused = post.post("/ingest/openlineage/batch", json=batch, headers=token(SPARK))
    assert refused.status_code == 403, refused.text
    problem = refused.json()
    assert refused.headers["content-type"] == "application/problem+json"
    assert problem["type"].endswith("/policy-forbidden")
    assert TRINO in problem["detail"] and "spark-sales" in problem["detail"]
    assert [p["name"] for p in problem["invalid-params"]] == [
        "/1/outputs/1/namespace",
        "/2/dataset/namespace",
    ]

    # A job namespace of another team, at the OpenLineage clients' default path too.
    for path in ("/ingest/openlineage", "/api/v1/lineage"):
        alone = post.post(path, json=event(5, TRINO), headers=token(SPARK))
        assert alone.status_code == 403, alone.text
        assert alone.json()["pointer"] == "/job/namespace"

    # The team allowed by group writes its own namespace; an admin writes any.
    assert (
        post.post(
            "/ingest/openlineage", json=event(6, TRINO), headers=token("trino-etl")
        ).status_code
        == 200
    )
    assert (
        post.post(
            "/ingest/openlineage", json=event(7, "elsewhere"), headers=token("root")
        ).status_code
        == 200
    )

    assert logged_run_ids(api) == [str(uuid.UUID(int=n + 1)) for n in (1, 6, 7)]
    post.close()


def test_the_export_feed_needs_its_permission(api: Process) -> None:
    refused = httpx.get(api.base_url + FEED, headers=token("alice"), timeout=30)
    assert refused.status_code == 403, refused.text
    assert refused.json()["type"].endswith("/policy-forbidden")
    assert "alice" in refused.json()["detail"]
    for allowed in ("exporter", "root"):  # named in `export`; an admin
        assert httpx.get(api.base_url + FEED, headers=token(allowed), timeout=30).status_code == 200


def test_one_decision_per_request_and_cached(
    database_url: str, tmp_path: Path, opa: OpaServer
) -> None:
    env = policy_env(tmp_path, METASTORE_OPA_URL=opa.url)
    with running("api", database_url, tmp_path, env=env) as api:
        batch = [event(n, SPARK, WAREHOUSE, f"{WAREHOUSE}/{n}") for n in range(1, 11)]
        answer = httpx.post(
            api.base_url + "/ingest/openlineage/batch", json=batch, headers=token(SPARK), timeout=30
        )
        assert answer.status_code == 200, answer.text
        (asked,) = opa.asked  # ten events, twelve namespaces: one batch decision
        opa.asked.clear()
        assert asked["context"]["identity"] == {"user": SPARK, "groups": []}
        assert asked["action"]["operation"] == "WriteNamespace"
        assert len(asked["action"]["filterResources"]) == 12
        assert {"namespace": {"name": WAREHOUSE}} in asked["action"]["filterResources"]

        # Decided within the last 30 s: OPA is not asked again, even when it is down.
        opa.stop()
        again = ingest(api, 11, SPARK, WAREHOUSE)
        assert again.status_code == 200, again.text
        assert not opa.asked
        assert metric(api, 'metastore_authz_cache_lookups_total{result="hit"}') >= 2
        assert metric(api, 'metastore_authz_opa_request_duration_seconds_count{rule="batch"}') == 1

        # Eight requests at once with the same undecided question: OPA is asked it once.
        opa.delay = 0.5
        opa.start()

        async def eight() -> list[int]:
            async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as client:
                answers = await asyncio.gather(
                    *(
                        client.post(
                            "/ingest/openlineage", json=event(n, TRINO), headers=token("trino-etl")
                        )
                        for n in range(20, 28)
                    )
                )
            return [a.status_code for a in answers]

        assert asyncio.run(eight()) == [200] * 8
        assert len(opa.asked) == 1


def test_opa_slow_or_down_is_a_503_and_nothing_is_stored(
    database_url: str, tmp_path: Path, opa: OpaServer
) -> None:
    env = policy_env(tmp_path, METASTORE_OPA_URL=opa.url, METASTORE_OPA_TIMEOUT="0.3")
    with running("api", database_url, tmp_path, env=env) as api:
        opa.delay = 1.0
        slow = ingest(api, 1, SPARK, WAREHOUSE)
        assert slow.status_code == 503, slow.text
        assert slow.json()["type"].endswith("/authorization-unavailable")
        assert "0.3 s" in slow.json()["detail"]
        assert slow.headers["retry-after"] == "5"  # the OpenLineage clients retry a 503
        export = httpx.get(api.base_url + FEED, headers=token("exporter"), timeout=30)
        assert export.status_code == 503, export.text
        assert metric(api, 'metastore_authz_opa_failures_total{reason="timeout"}') == 2

        opa.stop()
        down = ingest(api, 2, SPARK, WAREHOUSE)
        assert down.status_code == 503, down.text
        assert down.json()["type"].endswith("/authorization-unavailable")
        assert metric(api, 'metastore_authz_opa_failures_total{reason="error"}') == 1

        # Once OPA answers again, the emitter's retry is stored, and only it.
        opa.delay = 0
        opa.start()
        retried = ingest(api, 1, SPARK, WAREHOUSE)
        assert retried.status_code == 200, retried.text
        assert logged_run_ids(api) == [str(uuid.UUID(int=2))]


def test_opa_answering_undefined_denies(database_url: str, tmp_path: Path, opa: OpaServer) -> None:
    # A package OPA has no rules in: every decision is undefined, so nothing is allowed.
    env = policy_env(tmp_path, METASTORE_OPA_URL=opa.url, METASTORE_OPA_PACKAGE="not.there")
    with running("api", database_url, tmp_path, env=env) as api:
        refused = ingest(api, 1, SPARK, WAREHOUSE)
        assert refused.status_code == 403, refused.text
        assert httpx.get(api.base_url + FEED, headers=token("root"), timeout=30).status_code == 403
        assert metric(api, 'metastore_authz_opa_failures_total{reason="undefined"}') == 2


def test_groups_from_the_user_info_fetcher(database_url: str, tmp_path: Path) -> None:
    # spark-sales carries no groups; the user-info-fetcher puts it in Keycloak's /trino.
    with opa_server(POLICY, userinfo={SPARK: ["/trino"]}) as opa:
        env = policy_env(tmp_path, METASTORE_OPA_URL=opa.url)
        with running("api", database_url, tmp_path, env=env) as api:
            answer = ingest(api, 1, TRINO)
            assert answer.status_code == 200, answer.text
            other = ingest(api, 2, "elsewhere")
            assert other.status_code == 403, other.text
