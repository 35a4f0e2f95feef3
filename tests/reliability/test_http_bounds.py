"""The API process's HTTP bounds, against a real `metastore api` over raw sockets.

The request head is limited (431), the request bytes in flight are budgeted (503 with
Retry-After, given back when answered), transfer codings other than chunked are refused
(501), a path with a stray slash is a 404 that never names the client's Host, malformed
HTTP is a problem+json 400, and a WebSocket upgrade is plain HTTP behind the token check.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from metastore.auth import BearerAuth
from metastore.config import load_settings
from metastore.http_protocol import HEAD_LIMIT
from metastore.problems import type_uri
from tests.reliability.conftest import log_size, rss_bytes, run_event
from tests.support import Process, running

pytestmark = pytest.mark.reliability

EVENT = "/ingest/openlineage"
BATCH = "/ingest/openlineage/batch"
PROBLEM = "application/problem+json"
MiB = 1024 * 1024
MAX_EVENT_BYTES = 1 * MiB
BUDGET = 2 * MiB  # two maximal requests at once


@pytest.fixture(scope="module")
def api(module_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    env = {
        "METASTORE_MAX_EVENT_BYTES": str(MAX_EVENT_BYTES),
        "METASTORE_MAX_INFLIGHT_BYTES": str(BUDGET),
        "METASTORE_REQUEST_TIMEOUT": "20",
    }
    with running("api", module_database, tmp_path_factory.mktemp("bounds"), env=env) as process:
        yield process


def address(api: Process) -> tuple[str, int]:
    host, port = api.base_url.removeprefix("http://").split(":")
    return host, int(port)


class Answer:
    """One HTTP answer as read off the socket."""

    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def problem(self, status: int) -> dict[str, Any]:
        assert self.status == status, (self.status, self.body[:300])
        assert self.headers["content-type"] == PROBLEM
        problem: dict[str, Any] = json.loads(self.body)
        assert problem["status"] == status and problem["detail"]
        assert problem["type"] == type_uri(status) != "about:blank"  # clients tell them apart
        return problem


_unread: dict[socket.socket, bytes] = {}  # what came after an answer (pipelined answers)


def read_answer(sock: socket.socket, timeout: float = 30) -> Answer:
    """Reads one answer (head and Content-Length body) from the socket."""
    sock.settimeout(timeout)
    raw = _unread.pop(sock, b"")
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(65536)
        assert chunk, f"closed before an answer: {raw!r}"
        raw += chunk
    answer = Answer(raw)
    length = int(answer.headers.get("content-length", "0"))
    while len(answer.body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed inside the answer"
        answer.body += chunk
    answer.body, _unread[sock] = answer.body[:length], answer.body[length:]
    return answer


def exchange(api: Process, request: bytes) -> Answer:
    with socket.create_connection(address(api), timeout=30) as sock:
        sock.sendall(request)
        return read_answer(sock)


def post_head(path: str, length: int | None = None, extra: str = "") -> bytes:
    framing = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"{framing}\r\n{extra}\r\n"
    ).encode()


def event_body(**kw: Any) -> bytes:
    return json.dumps(run_event(job="bounds", **kw)).encode()


def inflight_bytes(api: Process) -> float:
    metrics = httpx.get(api.base_url + "/metrics", timeout=10).text
    for line in metrics.splitlines():
        if line.startswith("metastore_ingest_inflight_bytes "):
            return float(line.split()[1])
    raise AssertionError("no metastore_ingest_inflight_bytes in /metrics")


# --- the request head ----------------------------------------------------------------------


def test_a_head_just_under_the_limit_is_served(api: Process) -> None:
    pad = "a" * (HEAD_LIMIT - 200)
    answer = exchange(api, f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: {pad}\r\n\r\n".encode())
    assert answer.status == 200


@pytest.mark.parametrize("path", ["/healthz", EVENT, "/api/v1/jobs"])
def test_a_head_over_the_limit_in_one_piece_is_431(api: Process, path: str) -> None:
    pad = "a" * HEAD_LIMIT
    answer = exchange(api, f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Pad: {pad}\r\n\r\n".encode())
    assert str(HEAD_LIMIT) in answer.problem(431)["detail"]


def test_many_headers_over_the_limit_are_431(api: Process) -> None:
    headers = "".join(f"X-H{i}: {'v' * 60}\r\n" for i in range(HEAD_LIMIT // 60))
    answer = exchange(api, f"GET /healthz HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
    answer.problem(431)


def test_an_oversized_head_after_a_pipelined_request_is_431(api: Process) -> None:
    first = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    second = f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: {'a' * HEAD_LIMIT}\r\n\r\n".encode()
    with socket.create_connection(address(api), timeout=30) as sock:
        sock.sendall(first + second)  # the second head arrives with the first, uncounted
        assert read_answer(sock).status == 200
        read_answer(sock).problem(431)


def test_a_200_mb_header_is_refused_431_at_the_limit_without_reading_it_into_memory(
    api: Process,
) -> None:
    rss_before = rss_bytes(api.pid)
    chunk = b"a" * 65536
    sent = 0
    started = time.monotonic()
    with socket.create_connection(address(api), timeout=30) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Huge: ")
        try:
            while sent < 200 * MiB:
                if select.select([sock], [], [], 0)[0]:
                    break  # answered
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:  # closed by the server after its answer
            pass
        answer = read_answer(sock)
    elapsed = time.monotonic() - started
    grown = rss_bytes(api.pid) - rss_before
    print(
        f"\n200 MB header: 431 after {sent / MiB:.1f} MiB sent, {elapsed:.2f} s; "
        f"API RSS grew {grown / MiB:.1f} MiB"
    )
    answer.problem(431)
    assert sent < 200 * MiB  # refused while it was coming, not at its end
    assert grown < 20 * MiB
    assert httpx.get(api.base_url + "/healthz", timeout=10).status_code == 200


# --- transfer codings, malformed HTTP, trailing slashes, WebSocket ------------------------


@pytest.mark.parametrize("coding", ["gzip, chunked", "deflate,chunked", "identity, chunked"])
def test_a_transfer_coding_other_than_chunked_is_501_and_stores_nothing(
    api: Process, module_database: str, coding: str
) -> None:
    body = event_body()
    chunked = b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body)
    before = log_size(module_database)
    request = post_head(EVENT, extra=f"Transfer-Encoding: {coding}\r\n").replace(
        b"Transfer-Encoding: chunked\r\n", b"", 1
    )
    with socket.create_connection(address(api), timeout=30) as sock:
        sock.sendall(request + chunked)
        problem = read_answer(sock).problem(501)
        assert coding in problem["detail"] and "Content-Encoding" in problem["detail"]
        # the body was dropped by its chunked framing: the connection serves on
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock).status == 200
    assert log_size(module_database) == before


def test_a_plain_chunked_body_is_stored(api: Process, module_database: str) -> None:
    body = event_body()
    before = log_size(module_database)
    answer = exchange(api, post_head(EVENT) + b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body))
    assert answer.status == 200, answer.body
    assert log_size(module_database) == before + 1


def test_malformed_http_is_a_problem_json_400(api: Process) -> None:
    answer = exchange(api, b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
    answer.problem(400)


@pytest.mark.parametrize(
    "path", ["/api/v1/jobs/", "/api/v1/namespaces/", "/export/openlineage/events/", "/healthz/"]
)
def test_a_stray_trailing_slash_is_404_and_never_points_at_the_clients_host(
    api: Process, path: str
) -> None:
    answer = exchange(api, f"GET {path}?limit=1 HTTP/1.1\r\nHost: evil.example\r\n\r\n".encode())
    answer.problem(404)
    assert "location" not in answer.headers
    assert b"evil.example" not in answer.body
    assert exchange(
        api, f"GET {path.rstrip('/')} HTTP/1.1\r\nHost: evil.example\r\n\r\n".encode()
    ).status in (200, 304)


def test_a_websocket_upgrade_is_plain_http_behind_the_token_check(
    module_database: str, tmp_path: Path
) -> None:
    env = {"METASTORE_READ_TOKENS": "a-read-token", "METASTORE_EXPORT_TOKENS": "an-export-token"}
    with running("api", module_database, tmp_path, env=env) as api:
        for path in ("/api/v1/jobs", "/export/openlineage/events", "/healthz"):
            upgrade = (
                f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            ).encode()
            answer = exchange(api, upgrade)
            assert answer.status != 101
            if path == "/healthz":
                assert answer.status == 200
            else:
                answer.problem(401)


# --- the budget of bytes in flight ---------------------------------------------------------


class HeldRequest:
    """An ingest request that has sent its head and `sent` bytes of its body, and waits."""

    def __init__(self, api: Process, length: int, sent: int, chunked: bool = False) -> None:
        self.sock = socket.create_connection(address(api), timeout=30)
        if chunked:
            self.sock.sendall(post_head(BATCH) + b"%x\r\n%b\r\n" % (sent, b" " * sent))
        else:
            self.sock.sendall(post_head(BATCH, length) + b" " * sent)

    def close(self) -> None:
        self.sock.close()


def wait_for_inflight(api: Process, expected: float, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while (held := inflight_bytes(api)) != expected:
        assert time.monotonic() < deadline, f"{held} bytes in flight, not {expected}"
        time.sleep(0.05)


# Nearly a maximal request: two of them hold the budget but for a few hundred bytes.
NEARLY = MAX_EVENT_BYTES - 200


def test_past_the_budget_ingest_answers_503_with_retry_after_and_stores_nothing(
    api: Process, module_database: str
) -> None:
    wait_for_inflight(api, 0)
    held = [HeldRequest(api, MAX_EVENT_BYTES, NEARLY) for _ in range(2)]
    try:
        wait_for_inflight(api, 2 * NEARLY)  # the bytes that arrived
        before = log_size(module_database)
        body = event_body()
        refused = httpx.post(api.base_url + EVENT, content=body, timeout=30)
        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"] == PROBLEM
        assert refused.headers["retry-after"] == "1"
        assert "METASTORE_MAX_INFLIGHT_BYTES" in refused.json()["detail"]
        assert log_size(module_database) == before
        # Reads need no budget.
        assert httpx.get(api.base_url + "/api/v1/jobs", timeout=30).status_code == 200
    finally:
        for request in held:
            request.close()
    # A client that went away gives its bytes back: the same event is taken now.
    wait_for_inflight(api, 0)
    assert httpx.post(api.base_url + EVENT, content=body, timeout=30).status_code == 200
    assert log_size(module_database) == before + 1


def test_headers_alone_hold_no_budget(api: Process, module_database: str) -> None:
    """Four clients that send a head declaring a maximal body and then nothing (each could
    hold it until the request timeout, and again after reconnecting) hold nothing of the
    budget: the bytes are taken as they arrive, and other ingest requests get through."""
    wait_for_inflight(api, 0)
    stalled = [HeldRequest(api, MAX_EVENT_BYTES, 0) for _ in range(4)]
    try:
        before = log_size(module_database)
        for _ in range(3):
            posted = httpx.post(api.base_url + EVENT, content=event_body(), timeout=30)
            assert posted.status_code == 200, posted.text
        assert log_size(module_database) == before + 3
        assert inflight_bytes(api) == 0
    finally:
        for request in stalled:
            request.close()


def test_a_chunked_body_takes_its_bytes_as_they_come_and_is_refused_when_they_do_not_fit(
    api: Process,
) -> None:
    wait_for_inflight(api, 0)
    declared = [HeldRequest(api, size + 100, size) for size in (NEARLY, 512 * 1024)]
    chunked = HeldRequest(api, 0, 300 * 1024, chunked=True)
    try:
        wait_for_inflight(api, NEARLY + 812 * 1024)
        # 300 KiB more of the chunked body (600 KiB, under the 1 MiB limit of a request):
        # 2.1 MiB in all, past the 2 MiB budget.
        more = 300 * 1024
        chunked.sock.sendall(b"%x\r\n%b\r\n" % (more, b" " * more))
        problem = read_answer(chunked.sock).problem(503)
        assert "METASTORE_MAX_INFLIGHT_BYTES" in problem["detail"]
        # the refused request gave its bytes back
        wait_for_inflight(api, NEARLY + 512 * 1024)
    finally:
        for request in (*declared, chunked):
            request.close()
    wait_for_inflight(api, 0)


def test_a_gzip_body_takes_its_bytes_as_they_inflate(api: Process) -> None:
    wait_for_inflight(api, 0)
    held = [HeldRequest(api, size, size - 100) for size in (MAX_EVENT_BYTES, 512 * 1024)]
    try:
        wait_for_inflight(api, MAX_EVENT_BYTES + 512 * 1024 - 200)
        # 8 KB on the wire, 800 KB inflated: past the 512 KiB left of the budget.
        body = gzip.compress(b" " * (800 * 1024))
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        refused = httpx.post(api.base_url + BATCH, content=body, headers=headers, timeout=30)
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "1"
        wait_for_inflight(api, MAX_EVENT_BYTES + 512 * 1024 - 200)
    finally:
        for request in held:
            request.close()
    wait_for_inflight(api, 0)


def test_a_completed_request_gives_its_bytes_back(api: Process, module_database: str) -> None:
    wait_for_inflight(api, 0)
    batch = json.dumps([run_event(job="bounds", padding=2000) for _ in range(200)]).encode()
    results: list[int] = []

    def post() -> None:
        with httpx.Client(base_url=api.base_url, timeout=60) as client:
            for _ in range(5):
                results.append(client.post(BATCH, content=batch).status_code)

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(results) <= {200, 503} and 200 in results
    wait_for_inflight(api, 0)


@pytest.mark.parametrize("auth", ["enabled", "disabled"])
def test_the_token_check_lets_no_websocket_scope_reach_the_app(auth: str) -> None:
    """Behind the plain-HTTP answer above: should a WebSocket scope arrive all the same
    (another server, another uvicorn setting), the token check closes it unaccepted."""
    settings = load_settings({"METASTORE_AUTH": auth, "METASTORE_READ_TOKENS": "a-read-token"})
    reached: list[str] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope["type"])

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    check = BearerAuth(app, settings)
    for path in ("/api/v1/jobs", "/healthz"):
        scope = {
            "type": "websocket",
            "path": path,
            "headers": [(b"authorization", b"Bearer a-read-token")],
        }
        asyncio.run(check(scope, receive, send))  # type: ignore[arg-type]
    assert reached == []
    assert sent == [{"type": "websocket.close", "code": 1008}] * 2
    asyncio.run(check({"type": "lifespan"}, receive, send))  # type: ignore[arg-type]
    assert reached == ["lifespan"]
    with pytest.raises(ValueError, match="unsupported ASGI scope type"):
        asyncio.run(check({"type": "webtransport", "path": "/"}, receive, send))  # type: ignore[arg-type]
