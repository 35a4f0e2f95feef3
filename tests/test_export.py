"""The export feed `GET /export/openlineage/events`, through a real `metastore api` process."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import msgspec
import psycopg
import pytest

from metastore.eventlog import LogRecord, Position, append_events
from metastore.problems import type_uri
from tests.support import Process, running, start_process

FEED = "/export/openlineage/events"
NDJSON = {"Accept": "application/x-ndjson"}
BASE_TIME = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def run_event(
    i: int,
    namespace: str = "feed",
    job: str | None = None,
    run_id: uuid.UUID | None = None,
    event_time: dt.datetime | None = None,
    padding: int = 0,
) -> dict[str, Any]:
    """A small RunEvent, told apart from the others by `i`."""
    event: dict[str, Any] = {
        "eventType": "COMPLETE",
        "eventTime": (event_time or BASE_TIME + dt.timedelta(seconds=i)).isoformat(),
        "run": {"runId": str(run_id or uuid.UUID(int=i + 1))},
        "job": {"namespace": namespace, "name": job or f"job-{i % 5}"},
        "inputs": [],
        "outputs": [{"namespace": "s3://bucket", "name": f"table/{i}"}],
        "producer": "https://example.com/metastore-tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    if padding:
        event["run"]["facets"] = {"test": {"i": i, "pad": "x" * padding}}
    return event


def dataset_event(i: int) -> dict[str, Any]:
    return {
        "eventTime": (BASE_TIME + dt.timedelta(seconds=i)).isoformat(),
        "dataset": {"namespace": "s3://bucket", "name": f"table/{i}"},
        "producer": "https://example.com/metastore-tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
    }


def log_record(event: dict[str, Any]) -> LogRecord:
    body = msgspec.json.encode(event)
    job = event.get("job")
    run = event.get("run")
    return LogRecord(
        event_time=dt.datetime.fromisoformat(event["eventTime"]),
        kind="run" if run else "job" if job else "dataset",
        event_type=event.get("eventType"),
        run_id=uuid.UUID(run["runId"]) if run else None,
        job_namespace=job["namespace"] if job else None,
        job_name=job["name"] if job else None,
        producer=event["producer"],
        digest=hashlib.sha256(body).digest(),
        event_json=body,
    )


def append(database_url: str, events: list[dict[str, Any]]) -> None:
    """Appends the events in one transaction and commits (the NOTIFY goes out at commit)."""
    with psycopg.connect(database_url) as conn:
        append_events(conn, [log_record(e) for e in events])
        conn.commit()


def read_all(base_url: str, cursor: str = "", limit: int = 100, **params: str) -> list[Any]:
    """Pages through the feed until a page comes back empty."""
    events = []
    while True:
        page = httpx.get(
            base_url + FEED, params={"cursor": cursor, "limit": limit, **params}, timeout=30
        )
        assert page.status_code == 200, page.text
        body = page.json()
        events += body["events"]
        if not body["events"]:
            return events
        cursor = body["next_cursor"]


def test_pages_return_the_events_as_stored_in_log_order_with_a_cursor_to_go_on(
    database_url: str, api: Process
) -> None:
    events = [run_event(i) for i in range(25)]
    for chunk in (events[:3], events[3:20], events[20:]):
        append(database_url, chunk)
    cursor, got = "", []
    for expected_size in (10, 10, 5, 0):
        page = httpx.get(api.base_url + FEED, params={"cursor": cursor, "limit": 10})
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("application/json")
        body = page.json()
        assert len(body["events"]) == expected_size
        assert body["next_cursor"] and page.headers["x-next-cursor"] == body["next_cursor"]
        if expected_size == 0:  # the tail: the same cursor again, so a tailer keeps it
            assert body["next_cursor"] == cursor
        got += body["events"]
        cursor = body["next_cursor"]
    assert got == events
    # the default page is 100 events
    append(database_url, [run_event(i) for i in range(100, 230)])
    assert len(httpx.get(api.base_url + FEED).json()["events"]) == 100


def test_a_consumer_resumes_after_an_api_restart_with_nothing_lost_or_repeated(
    database_url: str, tmp_path: Path
) -> None:
    append(database_url, [run_event(i) for i in range(20)])
    api = start_process("api", database_url, tmp_path)
    cursor, got = "", []
    try:
        for _ in range(2):
            body = httpx.get(api.base_url + FEED, params={"cursor": cursor, "limit": 7}).json()
            got += body["events"]
            cursor = body["next_cursor"]  # the consumer's whole state
        api.kill(signal.SIGKILL)
    finally:
        api.stop()
    append(database_url, [run_event(i) for i in range(20, 31)])  # appended while it was down
    with running("api", database_url, tmp_path) as restarted:
        got += read_all(restarted.base_url, cursor, limit=7)
    expected = [run_event(i) for i in range(31)]
    assert got == expected


def test_filters_select_by_job_run_and_event_time_and_skip_the_rest(
    database_url: str, api: Process
) -> None:
    run_a = uuid.uuid4()
    events = [
        run_event(0, namespace="etl", job="load"),
        run_event(1, namespace="etl", job="load", run_id=run_a),
        run_event(2, namespace="etl", job="clean"),
        run_event(3, namespace="other", job="load"),
        dataset_event(4),
        run_event(5, namespace="etl", job="load", run_id=run_a),
    ]
    append(database_url, events)
    assert read_all(api.base_url, namespace="etl") == [events[i] for i in (0, 1, 2, 5)]
    assert read_all(api.base_url, namespace="etl", job="load") == [events[i] for i in (0, 1, 5)]
    assert read_all(api.base_url, job="load") == [events[i] for i in (0, 1, 3, 5)]
    assert read_all(api.base_url, run_id=str(run_a)) == [events[1], events[5]]
    since = (BASE_TIME + dt.timedelta(seconds=3)).isoformat()
    assert read_all(api.base_url, since=since) == events[3:]
    # A filter that matches nothing still moves the cursor to the end of what it looked at,
    # so a filtered tailer does not scan the same events again.
    empty = httpx.get(api.base_url + FEED, params={"namespace": "nowhere"}).json()
    everything = httpx.get(api.base_url + FEED).json()
    assert empty == {"events": [], "next_cursor": everything["next_cursor"]}
    append(database_url, [run_event(6, namespace="nowhere")])
    later = httpx.get(api.base_url + FEED, params={"namespace": "nowhere", "cursor": ""}).json()
    assert later["events"] == [run_event(6, namespace="nowhere")]


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ({"cursor": "bm90LWEtY3Vyc29y"}, "cursor"),
        ({"cursor": "%%%"}, "cursor"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"wait": "61"}, "wait"),
        ({"wait": "-1"}, "wait"),
        ({"wait": "soon"}, "wait"),
        ({"run_id": "42"}, "run_id"),
        ({"since": "yesterday"}, "since"),
        ({"namspace": "typo"}, "namspace"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(api: Process, query: dict[str, str], name: str) -> None:
    answer = httpx.get(api.base_url + FEED, params=query)
    assert answer.status_code == 400
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["pointer"] == name and name in problem["detail"]
    # the read API's type for a cursor it did not hand out, the same here
    kind = "invalid-cursor" if name == "cursor" else "invalid-request"
    assert problem["type"] == type_uri(400, kind)


def test_a_parameter_given_twice_is_a_400(api: Process) -> None:
    answer = httpx.get(api.base_url + FEED + "?job=a&job=b")
    assert answer.status_code == 400 and answer.json()["pointer"] == "job"


def test_a_long_poll_returns_within_100ms_of_the_append(database_url: str, api: Process) -> None:
    latencies = []
    for i in range(3):
        cursor = httpx.get(api.base_url + FEED).json()["next_cursor"]
        answer: dict[str, Any] = {}

        def poll(cursor: str = cursor, answer: dict[str, Any] = answer) -> None:
            response = httpx.get(
                api.base_url + FEED, params={"cursor": cursor, "wait": 10}, timeout=30
            )
            answer["at"] = time.monotonic()
            answer["body"] = response.json()

        poller = threading.Thread(target=poll)
        asked = time.monotonic()
        poller.start()
        time.sleep(0.5)  # the request is waiting on an empty tail by now
        assert "at" not in answer, "the long poll answered before anything was appended"
        with psycopg.connect(database_url) as conn:
            append_events(conn, [log_record(run_event(i))])
            conn.commit()
            committed = time.monotonic()
        poller.join(timeout=15)
        assert answer["body"]["events"] == [run_event(i)]
        assert answer["at"] - asked > 0.5
        latencies.append(answer["at"] - committed)
    print(f"long-poll latency after commit: {[f'{s * 1000:.1f} ms' for s in latencies]}")
    # Woken by NOTIFY, not by a poll: the median round is within 100 ms of the commit (one
    # round may lose the CPU on a loaded 2-core CI machine), none near a poll interval.
    assert sorted(latencies)[1] < 0.1, latencies
    assert max(latencies) < 1.0, latencies


def test_a_long_poll_that_times_out_returns_nothing_and_the_same_cursor(api: Process) -> None:
    cursor = Position(5, 7).encode()
    started = time.monotonic()
    answer = httpx.get(api.base_url + FEED, params={"cursor": cursor, "wait": "0.6"}, timeout=10)
    assert time.monotonic() - started >= 0.6
    assert answer.json() == {"events": [], "next_cursor": cursor}


def test_ndjson_with_a_limit_announces_where_to_continue(database_url: str, api: Process) -> None:
    events = [run_event(i) for i in range(12)]
    append(database_url, events)
    first = httpx.get(api.base_url + FEED, params={"limit": 7}, headers=NDJSON)
    assert first.headers["content-type"].startswith("application/x-ndjson")
    lines = first.text.splitlines()
    assert [json.loads(line) for line in lines] == events[:7]
    rest = httpx.get(
        api.base_url + FEED, params={"cursor": first.headers["x-next-cursor"]}, headers=NDJSON
    )
    assert [json.loads(line) for line in rest.text.splitlines()] == events[7:]
    tail = httpx.get(
        api.base_url + FEED, params={"cursor": rest.headers["x-next-cursor"]}, headers=NDJSON
    )
    assert tail.text == "" and tail.headers["x-next-cursor"] == rest.headers["x-next-cursor"]
    # the JSON feed and the NDJSON stream agree on positions
    page = httpx.get(api.base_url + FEED, params={"limit": 7}).json()
    assert page["next_cursor"] == first.headers["x-next-cursor"]
    # a stream may be longer than a JSON page
    long = httpx.get(api.base_url + FEED, params={"limit": 5000}, headers=NDJSON)
    assert len(long.text.splitlines()) == 12
    assert (
        httpx.get(api.base_url + FEED, params={"limit": "1_0"}, headers=NDJSON).status_code == 400
    )


def test_an_ndjson_long_poll_streams_the_next_append(database_url: str, api: Process) -> None:
    cursor = httpx.get(api.base_url + FEED).json()["next_cursor"]
    answer: dict[str, Any] = {}

    def poll() -> None:
        response = httpx.get(
            api.base_url + FEED, params={"cursor": cursor, "wait": 10}, headers=NDJSON, timeout=30
        )
        answer["lines"] = response.text.splitlines()
        answer["next"] = response.headers["x-next-cursor"]

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.3)
    append(database_url, [run_event(1), run_event(2)])
    poller.join(timeout=15)
    assert [json.loads(line) for line in answer["lines"]] == [run_event(1), run_event(2)]
    assert answer["next"] == httpx.get(api.base_url + FEED).json()["next_cursor"]


def _rss_bytes(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def test_ndjson_streams_100000_events_with_flat_memory(database_url: str, api: Process) -> None:
    total, batch = 100_000, 10_000
    with psycopg.connect(database_url) as conn:
        for start in range(0, total, batch):
            append_events(
                conn, [log_record(run_event(i, padding=300)) for i in range(start, start + batch)]
            )
            conn.commit()
    # warm up: the first requests import and allocate what every later one reuses
    httpx.get(api.base_url + FEED, params={"limit": 1000})
    httpx.get(api.base_url + FEED, params={"limit": 2000}, headers=NDJSON)
    baseline = _rss_bytes(api.pid)
    peak = baseline
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_bytes(api.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    count, streamed, last_i = 0, 0, -1
    try:
        with httpx.stream("GET", api.base_url + FEED, headers=NDJSON, timeout=60) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                streamed += len(line) + 1
                i = json.loads(line)["run"]["facets"]["test"]["i"]
                assert i == last_i + 1  # log order, nothing skipped or repeated
                last_i, count = i, count + 1
    finally:
        done.set()
        sampler.join()
    growth = peak - baseline
    print(
        f"NDJSON: {count} events, {streamed / 1e6:.1f} MB streamed; API RSS "
        f"{baseline / 1e6:.1f} MB before, peak {peak / 1e6:.1f} MB (+{growth / 1e6:.1f} MB)"
    )
    assert count == total
    assert growth < streamed / 4, (growth, streamed)


def test_a_page_ends_at_4_mib_of_events_and_its_cursor_goes_on(
    database_url: str, api: Process
) -> None:
    # 1.5 MiB events: two fit in a page's 4 MiB, a third would not; a 6 MiB one is a page
    # of its own. With filters the page ends at the cap the same way.
    mib = 1024 * 1024
    sizes = [mib * 3 // 2] * 5 + [6 * mib] + [100] * 3
    events = [run_event(i, padding=size) for i, size in enumerate(sizes)]
    append(database_url, events)
    cursor, pages = "", []
    while True:
        page = httpx.get(api.base_url + FEED, params={"cursor": cursor, "limit": 10}, timeout=30)
        assert page.status_code == 200
        body = page.json()
        if not body["events"]:
            break
        pages.append([e["run"]["facets"]["test"]["i"] for e in body["events"]])
        cursor = body["next_cursor"]
    assert pages == [[0, 1], [2, 3], [4], [5], [6, 7, 8]]
    assert read_all(api.base_url, limit=10, namespace="feed") == events
    streamed = httpx.get(api.base_url + FEED, headers=NDJSON, timeout=30)
    assert [json.loads(line) for line in streamed.text.splitlines()] == events
