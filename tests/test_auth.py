"""Bearer tokens, one scope per API, against a real `metastore api` (and `metastore dev`)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport

from metastore.embedded_pg import free_port
from tests.support import Process, running
from tests.test_export import FEED, append, run_event

SCOPES = ("ingest", "read", "export")
# One request per API; each answers 2xx to a token of its own scope.
REQUESTS = {
    "ingest": ("POST", "/ingest/openlineage"),
    "read": ("GET", "/api/v1/namespaces"),
    "export": ("GET", FEED),
}


class Tokens:
    def __init__(self, tmp_path: Path) -> None:
        self.by_scope = {scope: f"{scope}-{secrets.token_urlsafe(16)}" for scope in SCOPES}
        self.second_read = f"read2-{secrets.token_urlsafe(16)}"
        self.export_file = tmp_path / "export-tokens"  # what a mounted Secret looks like
        self.export_file.write_text(f"\n{self.by_scope['export']}\n")

    def env(self) -> dict[str, str]:
        return {
            "METASTORE_AUTH": "enabled",
            "METASTORE_INGEST_TOKENS": self.by_scope["ingest"],
            "METASTORE_READ_TOKENS": f"{self.by_scope['read']}, {self.second_read}",
            "METASTORE_EXPORT_TOKENS_FILE": str(self.export_file),
        }

    def all(self) -> list[str]:
        return [*self.by_scope.values(), self.second_read]


@pytest.fixture
def tokens(tmp_path: Path) -> Tokens:
    return Tokens(tmp_path)


@pytest.fixture
def api(database_url: str, tmp_path: Path, tokens: Tokens) -> Iterator[Process]:
    with running("api", database_url, tmp_path, env=tokens.env()) as process:
        yield process


def _ask(api: Process, scope: str, token: str | None, n: int) -> httpx.Response:
    method, path = REQUESTS[scope]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = run_event(n) if method == "POST" else None
    return httpx.request(method, api.base_url + path, headers=headers, json=body, timeout=30)


def test_each_api_takes_only_its_own_scope(api: Process, tokens: Tokens) -> None:
    observed, expected = {}, {}
    for n, (api_scope, token_scope) in enumerate((a, t) for a in SCOPES for t in (*SCOPES, None)):
        token = tokens.by_scope[token_scope] if token_scope else None
        answer = _ask(api, api_scope, token, n)
        observed[api_scope, token_scope] = (
            "2xx" if 200 <= answer.status_code < 300 else str(answer.status_code)
        )
        expected[api_scope, token_scope] = (
            "2xx" if token_scope == api_scope else "403" if token_scope else "401"
        )
        if answer.status_code in (401, 403):
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.headers["www-authenticate"].startswith('Bearer realm="metastore"')
            assert api_scope in answer.json()["detail"]
    assert observed == expected
    # Of the three ingest attempts only the one with the ingest token stored its event.
    feed = httpx.get(
        api.base_url + FEED, headers={"Authorization": f"Bearer {tokens.by_scope['export']}"}
    ).json()
    assert feed["events"] == [run_event(0)]


def test_unknown_or_malformed_credentials_are_401(api: Process, tokens: Tokens) -> None:
    for header in (
        "Bearer not-a-token",
        f"Bearer {tokens.by_scope['export']}x",
        f"Basic {tokens.by_scope['export']}",
        "Bearer",
        tokens.by_scope["export"],
    ):
        answer = httpx.get(api.base_url + FEED, headers={"Authorization": header})
        assert answer.status_code == 401, header
        assert answer.headers["www-authenticate"].startswith("Bearer")
    # the second comma-separated token works as well as the first; the scheme is any case
    answer = httpx.get(
        api.base_url + "/api/v1/namespaces",
        headers={"Authorization": f"bearer {tokens.second_read}"},
    )
    assert answer.status_code == 200


def test_health_and_metrics_need_no_token(api: Process) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert httpx.get(api.base_url + path).status_code == 200, path


def test_no_token_appears_in_the_log_even_when_refused(api: Process, tokens: Tokens) -> None:
    wrong = f"guess-{secrets.token_urlsafe(16)}"
    for token in (*tokens.all(), wrong):
        for scope in SCOPES:
            _ask(api, scope, token, 100)
    httpx.get(api.base_url + FEED, headers={"Authorization": f"Basic {wrong}"})
    time.sleep(0.2)  # let the last log lines reach the file
    output = api.output()
    assert "request" in output  # the requests were logged...
    for token in (*tokens.all(), wrong):
        assert token not in output  # ...without their tokens


def test_the_openlineage_client_sends_its_api_key_as_bearer_token(
    api: Process, tokens: Tokens
) -> None:
    def client(token: str) -> OpenLineageClient:
        config = HttpConfig(
            url=api.base_url,
            endpoint="ingest/openlineage",
            auth=ApiKeyTokenProvider({"apiKey": token}),
            retry={"total": 0},
        )
        return OpenLineageClient(transport=HttpTransport(config))

    event = RunEvent(
        eventType=RunState.START,
        eventTime="2024-05-01T00:00:00Z",
        run=Run(runId=str(uuid.uuid4())),
        job=Job(namespace="client", name="auth"),
        producer="https://example.com/metastore-tests",
    )
    client(tokens.by_scope["ingest"]).emit(event)
    with pytest.raises(requests.HTTPError, match="403"):
        client(tokens.by_scope["read"]).emit(event)
    feed = httpx.get(
        api.base_url + FEED, headers={"Authorization": f"Bearer {tokens.by_scope['export']}"}
    ).json()
    assert [e["run"]["runId"] for e in feed["events"]] == [event.run.runId]


def test_configured_tokens_are_enforced_even_with_auth_disabled(
    database_url: str, tmp_path: Path, tokens: Tokens
) -> None:
    env = {**tokens.env(), "METASTORE_AUTH": "disabled"}
    with running("api", database_url, tmp_path, env=env) as api:
        assert httpx.get(api.base_url + FEED).status_code == 401


def _dev(database_url: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    full_env.update(
        METASTORE_DATABASE_URL=database_url, METASTORE_PROJECTOR_PORT=str(free_port()), **env
    )
    with log.open("wb") as out:
        dev = subprocess.Popen(
            [sys.executable, "-m", "metastore", "dev", "--port", str(port)],
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert dev.poll() is None, log.read_text()
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return dev, base
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def _stop(dev: subprocess.Popen[bytes]) -> None:
    dev.terminate()
    try:
        dev.wait(timeout=30)
    except subprocess.TimeoutExpired:
        dev.kill()
        dev.wait()


def test_dev_enforces_configured_tokens(database_url: str, tmp_path: Path, tokens: Tokens) -> None:
    log = tmp_path / "dev.log"
    env = {k: v for k, v in tokens.env().items() if k != "METASTORE_AUTH"}
    dev, base = _dev(database_url, env, log)
    try:
        assert httpx.get(base + FEED).status_code == 401
        export = {"Authorization": f"Bearer {tokens.by_scope['export']}"}
        assert httpx.get(base + FEED, headers=export).status_code == 200
    finally:
        _stop(dev)
    assert "open to anyone" not in log.read_text()


def test_dev_without_tokens_runs_open_on_loopback_and_says_so(
    database_url: str, tmp_path: Path
) -> None:
    append(database_url, [run_event(1)])
    log = tmp_path / "dev.log"
    dev, base = _dev(database_url, {}, log)
    try:
        assert httpx.get(base + FEED).json()["events"] == [run_event(1)]
    finally:
        _stop(dev)
    assert "open to anyone" in log.read_text()
