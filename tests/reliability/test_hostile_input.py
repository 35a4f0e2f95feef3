"""Hostile input against ingest, the read API and the export feed of a real `metastore api`.

Nothing is answered with a 5xx, nothing hangs, nothing is half-written: each hostile
request leaves the log as it was (a mixed batch adds exactly its valid events).
Hypothesis generates envelopes around the spec; schemathesis runs negative mode against
the ingest and export operations (tests/test_schemathesis.py covers /api/v1).
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from projections.runner import catch_up
from tests.conftest import Server
from tests.logdata import append
from tests.reliability.conftest import PRODUCER, RUN_SCHEMA, log_size, run_event
from tests.support import Process, all_scenario_events, running

pytestmark = pytest.mark.reliability

REQUEST_TIMEOUT_S = 3
JSON = {"Content-Type": "application/json"}
PROBLEM = "application/problem+json"
EVENT = "/ingest/openlineage"
BATCH = "/ingest/openlineage/batch"
FEED = "/export/openlineage/events"
MAX_BYTES = 32 * 1024 * 1024  # the default METASTORE_MAX_EVENT_BYTES


@pytest.fixture(scope="module")
def hostile_db(pg_server: Server, template_db: str) -> Iterator[str]:
    """A database holding the folded conformance scenarios (so reads have rows to find)."""
    with pg_server.database("hostile", template_db) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            append(conn, all_scenario_events())
        catch_up(url)
        yield url


@pytest.fixture(scope="module")
def api(hostile_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    env = {"METASTORE_REQUEST_TIMEOUT": str(REQUEST_TIMEOUT_S)}
    with running("api", hostile_db, tmp_path_factory.mktemp("hostile"), env=env) as process:
        yield process


@pytest.fixture(scope="module")
def http(api: Process) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.base_url, timeout=60) as client:
        yield client


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"] == PROBLEM
    problem: dict[str, Any] = response.json()
    assert problem["status"] == status and problem["detail"]
    return problem


def stored(db_url: str, event: dict[str, Any]) -> int:
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM event_log WHERE event::jsonb = %s::jsonb", (json.dumps(event),)
        ).fetchone()
    assert row is not None
    return int(row[0])


def event_text(**extra: str) -> bytes:
    """A valid event's JSON with raw JSON text `extra` spliced in as more top-level keys."""
    text = json.dumps(run_event(job="hostile"))[:-1]
    return (text + "".join(f', "{k}": {v}' for k, v in extra.items()) + "}").encode()


def streamed(size: int, chunk: bytes = b" " * 65536) -> Iterator[bytes]:
    """A body of `size` bytes sent as it is generated (no Content-Length, never in memory)."""
    for _ in range(size // len(chunk)):
        yield chunk


def gzip_bomb(inflated: int = 10 * 1024**3) -> bytes:
    """~10 MB of gzip that inflates to 10 GB: concatenated members of 1 MiB of zeros each."""
    member = gzip.compress(bytes(1024 * 1024), compresslevel=9)
    return member * (inflated // (1024 * 1024))


HOSTILE_BODIES: list[tuple[str, str, Any, dict[str, str], int]] = [
    ("truncated", EVENT, event_text()[:-25], JSON, 400),
    ("malformed", EVENT, b'{"eventTime": , "run": }', JSON, 400),
    ("trailing-garbage", EVENT, event_text() + b" {}", JSON, 400),
    ("invalid-utf8", EVENT, event_text()[:-1] + b', "bad": "\xff\xfe\xc3("}', JSON, 400),
    ("nul-in-string", EVENT, event_text(nul='"a\\u0000b"'), JSON, 422),
    ("nul-in-key", EVENT, event_text(**{"a\\u0000": "1"}), JSON, 422),
    ("lone-surrogate", EVENT, event_text(s='"\\ud800"'), JSON, 400),
    ("deep-10000-arrays", EVENT, event_text(deep="[" * 10_000 + "]" * 10_000), JSON, 400),
    (
        "deep-10000-objects",
        EVENT,
        event_text(deep='{"a":' * 10_000 + "1" + "}" * 10_000),
        JSON,
        400,
    ),
    ("deep-10000-batch", BATCH, b"[" * 10_000 + b"]" * 10_000, JSON, 400),
    ("wrong-content-type", EVENT, event_text(), {"Content-Type": "text/plain"}, 415),
    (
        "form-content-type",
        EVENT,
        event_text(),
        {"Content-Type": "application/x-www-form-urlencoded"},
        415,
    ),
    ("wrong-content-encoding", EVENT, event_text(), {**JSON, "Content-Encoding": "br"}, 415),
    ("not-gzip", EVENT, event_text(), {**JSON, "Content-Encoding": "gzip"}, 400),
    ("batch-not-array", BATCH, event_text(), JSON, 422),
    # A batch's elements are checked one by one: bytes that make the body not JSON still
    # refuse the whole body, before any element is stored.
    ("invalid-utf8-in-batch", BATCH, b"[" + event_text()[:-1] + b', "bad": "\xff"}]', JSON, 400),
    ("lone-surrogate-in-batch", BATCH, b"[" + event_text(s='"\\ud800"') + b"]", JSON, 400),
    ("batch-of-1000000", BATCH, b"[" + b",".join([b"{}"] * 1_000_000) + b"]", JSON, 413),
    ("batch-of-1000000-numbers", BATCH, b"[" + b",".join([b"1"] * 1_000_000) + b"]", JSON, 413),
]


@pytest.mark.parametrize(
    ("path", "body", "headers", "status"),
    [case[1:] for case in HOSTILE_BODIES],
    ids=[case[0] for case in HOSTILE_BODIES],
)
def test_hostile_bodies_get_a_4xx_and_write_nothing(
    http: httpx.Client,
    hostile_db: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    status: int,
) -> None:
    before = log_size(hostile_db)
    assert_problem(http.post(path, content=body, headers=headers), status)
    assert log_size(hostile_db) == before


@pytest.mark.parametrize("path", [EVENT, BATCH])
def test_a_100_mb_body_is_refused_413_while_it_streams_in(
    http: httpx.Client, hostile_db: str, path: str
) -> None:
    before = log_size(hostile_db)
    started = time.monotonic()
    assert_problem(http.post(path, content=streamed(100 * 1024 * 1024), headers=JSON), 413)
    elapsed = time.monotonic() - started
    print(f"\n100 MB body to {path}: 413 after {elapsed:.2f} s")
    assert log_size(hostile_db) == before


def test_a_gzip_bomb_of_10_mb_inflating_to_10_gb_is_refused_quickly(
    http: httpx.Client, hostile_db: str, api: Process
) -> None:
    bomb = gzip_bomb()
    before = log_size(hostile_db)
    started = time.monotonic()
    response = http.post(EVENT, content=bomb, headers={**JSON, "Content-Encoding": "gzip"})
    elapsed = time.monotonic() - started
    print(
        f"\ngzip bomb: {len(bomb) / 1e6:.1f} MB inflating to 10 GB: "
        f"{response.status_code} after {elapsed:.2f} s"
    )
    assert_problem(response, 413)
    assert elapsed < 30  # it stopped inflating at the limit: 10 GB would take minutes
    assert log_size(hostile_db) == before


def test_a_large_number_and_a_missing_content_type_are_stored_as_sent(
    http: httpx.Client, hostile_db: str
) -> None:
    event = run_event(job="hostile")
    event["run"]["facets"]["numbers"] = {"big": int("9" * 400), "neg": -int("7" * 400)}
    body = json.dumps(event).encode()
    assert http.post(EVENT, content=body, headers={}).status_code == 200  # read as JSON
    assert stored(hostile_db, event) == 1


def test_a_mixed_batch_stores_exactly_its_valid_events(http: httpx.Client, hostile_db: str) -> None:
    valid = [run_event(job="mixed") for _ in range(3)]
    missing_run_id = run_event(job="mixed")
    del missing_run_id["run"]["runId"]
    bad_time = run_event(job="mixed", event_type="COMPLETE") | {"eventTime": "yesterday"}
    with_nul = run_event(job="mixed") | {"producer": "a\u0000b"}
    batch = [valid[0], missing_run_id, valid[1], "a string", bad_time, with_nul, valid[2], {}]
    before = log_size(hostile_db)
    response = http.post(BATCH, json=batch)
    assert response.status_code == 200
    result = response.json()
    assert result["status"] == "partial_success"
    assert [f["index"] for f in result["failed_events"]] == [1, 3, 4, 5, 7]
    assert log_size(hostile_db) == before + 3
    assert [stored(hostile_db, e) for e in valid] == [1, 1, 1]


def slow_request(api: Process, head: bytes, trickle: bytes, limit: float) -> tuple[bytes, float]:
    """Sends `head`, then `trickle` a byte a second; returns the answer and when it came."""
    host, port = api.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=limit) as sock:
        sock.sendall(head)
        started = time.monotonic()
        sock.settimeout(1.0)
        for byte in trickle:
            try:
                sock.sendall(bytes([byte]))
                answer = sock.recv(65536)
                return answer, time.monotonic() - started  # an answer, or b"" when closed
            except TimeoutError:
                pass
            except OSError:  # reset by the server: closed
                return b"", time.monotonic() - started
            assert time.monotonic() - started < limit, "the slow client was never cut off"
    raise AssertionError("the whole slow request was sent")


SLOW = [
    (
        "body",
        b"POST /ingest/openlineage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
        b"\r\nContent-Length: 2000\r\n\r\n",
        event_text(),
    ),
    (
        "chunked-body",
        b"POST /ingest/openlineage/batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"1\r\n[\r\n" * 100,
    ),
    ("headers", b"POST /ingest/openlineage HTTP/1.1\r\n", b"X-Slow: " + b"a" * 100),
    ("read-api-headers", b"GET /api/v1/namespaces HTTP/1.1\r\n", b"X-Slow: " + b"a" * 100),
]


@pytest.mark.parametrize(("head", "trickle"), [s[1:] for s in SLOW], ids=[s[0] for s in SLOW])
def test_a_client_sending_a_byte_a_second_is_cut_off_at_the_request_timeout(
    api: Process, hostile_db: str, head: bytes, trickle: bytes
) -> None:
    before = log_size(hostile_db)
    answer, after = slow_request(api, head, trickle, limit=REQUEST_TIMEOUT_S + 5)
    print(f"\nslow client: {answer[:30]!r} after {after:.1f} s")
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408")
    assert after < REQUEST_TIMEOUT_S + 2
    assert log_size(hostile_db) == before


# --- the read API and the export feed: every parameter, hostile values --------------------

SQL_METACHARACTERS = [
    "' OR 1=1 --",
    "'; DROP TABLE event_log; --",
    '" OR ""="',
    "%",
    "_",
    "%_%",
    "\\",
    "\\%",
    ";",
    "'",
    "''",
    "`",
    "$1",
    "%(namespace)s",
    "{}",
    "a\u0000b",
    "\u202e\u0301",
    "x" * 5000,
]
WRONG_NUMBERS = ["abc", "-1", "nan", "inf", "61", "", "0x10", "1,5"]  # `wait`: 0 to 60 s
WRONG_TYPES = ["abc", "1.5", "-1", "0x10", "9" * 400, "", " 7", "١٢"]  # last: Arabic 12
CONTROL = "zz-no-such-thing"


def operations(http: httpx.Client) -> list[tuple[str, dict[str, Any]]]:
    document = http.get("/api/v1/openapi.json").json()
    return [
        (path, op["get"])
        for path, op in document["paths"].items()
        if "get" in op
        and (path.startswith("/api/v1/") or path == FEED)
        and path != "/api/v1/openapi.json"
    ]


def url_for(
    path: str, op: dict[str, Any], name: str | None, value: str
) -> tuple[str, dict[str, str]]:
    """The operation's path with unknown ids (or `value` for `name`), and the query."""
    params = [p for p in op.get("parameters", []) if p["in"] in ("path", "query")]
    query: dict[str, str] = {}
    for p in params:
        if p["in"] == "path":
            raw = value if p["name"] == name else str(uuid.uuid4())
            path = path.replace("{" + p["name"] + "}", quote(raw, safe=""))
        elif p["name"] == name:
            query[p["name"]] = value
        elif p.get("required"):
            choices = p.get("schema", {}).get("enum")  # (a required choice: its first)
            query[p["name"]] = (
                "job:" + str(uuid.uuid4())
                if p["name"] == "node"
                else choices[0]
                if choices
                else CONTROL
            )
    return path, query


def occurs_in_log(db_url: str, value: str) -> bool:
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT EXISTS (SELECT FROM event_log WHERE strpos(lower(event::text), lower(%s)) > 0)",
            (value,),
        ).fetchone()
    return bool(row and row[0])


def test_hostile_parameters_on_every_read_and_export_operation(
    http: httpx.Client, hostile_db: str
) -> None:
    sent = 0
    absent = {
        v for v in SQL_METACHARACTERS if "\u0000" not in v and not occurs_in_log(hostile_db, v)
    }
    for path, op in operations(http):
        params = [p for p in op.get("parameters", []) if p["in"] in ("path", "query")]
        base_path, base_query = url_for(path, op, None, "")
        unknown = http.get(base_path, params=base_query)
        sent += 1
        assert unknown.status_code < 500, (path, unknown.text)
        if any(p["in"] == "path" for p in params):
            assert_problem(unknown, 404)  # unknown ids
        for param in params:
            name, schema = param["name"], param.get("schema", {})
            free_text = (
                schema.get("type") == "string"
                and "format" not in schema
                and schema.get("pattern", "^[^\u0000]*$") == "^[^\u0000]*$"
                and name != "cursor"
            )
            p, q = url_for(path, op, name, CONTROL)
            control = http.get(p, params=q)
            sent += 1
            values = list(SQL_METACHARACTERS)
            if schema.get("type") == "integer":
                values += WRONG_TYPES
            elif schema.get("type") == "number":
                values += WRONG_NUMBERS
            for value in values:
                p, q = url_for(path, op, name, value)
                sendable = value.isascii() and value.isprintable() and value == value.strip()
                headers = {"If-None-Match": value[:200]} if sendable and value else {}
                response = http.get(p, params=q, headers=headers)
                sent += 1
                where = (path, name, value[:40], response.text[:300])
                assert response.status_code < 500, where
                if response.status_code >= 400:
                    assert response.headers["content-type"] == PROBLEM, where
                if schema.get("type") in ("integer", "number"):
                    assert response.status_code == 400, where
                if free_text and value in absent and len(value) <= 200:
                    # a metacharacter is just a character: a string found nowhere finds
                    # nothing, like any other (a LIKE wildcard would find everything)
                    assert response.status_code == control.status_code, where
                    if response.status_code == 200:
                        assert _items(response.json()) == _items(control.json()), where
    print(f"\nhostile parameters: {sent} requests to {len(operations(http))} operations, no 5xx")


def _items(body: dict[str, Any]) -> Any:
    for key in ("items", "events", "nodes"):
        if key in body:
            return body[key]
    return body


# --- Hypothesis: envelopes around the spec ----------------------------------------------

names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
json_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | names
)
facet_values = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """A RunEvent, JobEvent or DatasetEvent per the spec, then maybe one mutation."""
    kind = draw(st.sampled_from(["run", "job", "dataset"]))
    event: dict[str, Any] = {
        "eventTime": draw(
            st.sampled_from(
                [
                    "2024-05-01T10:00:00Z",
                    "2024-05-01T10:00:00.123456+02:00",
                    "2024-05-01T10:00:00",
                ]
            )
        ),
        "producer": draw(names),
        "schemaURL": RUN_SCHEMA if kind == "run" else PRODUCER,
    }
    if kind in ("run", "job"):
        event["job"] = {
            "namespace": draw(names),
            "name": draw(names),
            "facets": draw(st.dictionaries(names, facet_values, max_size=2)),
        }
    if kind == "run":
        event["run"] = {
            "runId": str(draw(st.uuids())),
            "facets": draw(st.dictionaries(names, facet_values, max_size=2)),
        }
        event["eventType"] = draw(
            st.sampled_from(["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"])
        )
        event["inputs"] = [{"namespace": draw(names), "name": draw(names)}]
    if kind == "dataset":
        event["dataset"] = {"namespace": draw(names), "name": draw(names)}
    mutation = draw(
        st.sampled_from(
            ["none", "none", "drop", "retype", "empty-name", "bad-uuid", "bad-time", "bad-type"]
        )
    )
    if mutation == "drop":
        event.pop(draw(st.sampled_from(sorted(event))))
    elif mutation == "retype":
        event[draw(st.sampled_from(sorted(event)))] = draw(json_leaf)
    elif mutation == "empty-name" and kind != "dataset":
        event["job"]["name"] = ""
    elif mutation == "bad-uuid" and kind == "run":
        event["run"]["runId"] = draw(names)
    elif mutation == "bad-time":
        event["eventTime"] = draw(names)
    elif mutation == "bad-type" and kind == "run":
        event["eventType"] = draw(names)
    return event


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(event=envelopes())
def test_generated_envelopes_are_stored_or_refused_naming_the_field(
    http: httpx.Client, hostile_db: str, event: dict[str, Any]
) -> None:
    before = log_size(hostile_db)
    response = http.post(EVENT, json=event)
    if response.status_code == 200:
        assert stored(hostile_db, event) == 1
        return
    problem = assert_problem(response, response.status_code)
    assert 400 <= response.status_code < 500
    if response.status_code == 422:
        assert "pointer" in problem, problem
    assert log_size(hostile_db) == before


# --- schemathesis: negative mode on ingest and export -------------------------------------


def test_schemathesis_negative_mode_on_ingest_and_export(api: Process, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            api.base_url + "/api/v1/openapi.json",
            "--url",
            api.base_url,
            "--mode",
            "negative",
            "--include-operation-id-regex",
            "^(ingestEvent|ingestBatch|exportEvents)$",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "40",
            "--seed",
            "7",
            "--request-timeout",
            "15",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    summary = [line for line in result.stdout.splitlines() if "passed" in line or "failed" in line]
    print("\nschemathesis negative:", *summary[-3:], sep="\n  ")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
