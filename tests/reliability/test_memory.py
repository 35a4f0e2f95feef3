"""Memory: the API's RSS stays bounded while it ingests a lot of events, and by its budget of
bytes in flight (METASTORE_MAX_INFLIGHT_BYTES) under concurrent maximal batches.

Batches of 100 ~3 KB events from 8 concurrent clients; the API's VmRSS is sampled from
/proc. The peak must stay under a fixed bound and must not grow with the volume (RSS at
the end vs after the first quarter). The export of ten maximal (30 MB) events stays under
a bound derived from its page's byte cap. The export feed's flat-memory stream of 100,000
events is tests/test_export.py::test_ndjson_streams_100000_events_with_flat_memory.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import psycopg
import pytest

from metastore.config import load_settings
from metastore.envelope import MAX_BATCH_EVENTS
from metastore.eventlog import append_events
from tests.logdata import log_record
from tests.reliability.conftest import all_at_once, log_size, rss_bytes, run_event, sampled
from tests.support import start_process

pytestmark = pytest.mark.reliability

EVENT_PADDING = 2600  # ~3 KB an event
BATCH = 100
CLIENTS = 8
RSS_BOUND = 300 * 1024 * 1024
MiB = 1024 * 1024
JSON = {"Content-Type": "application/json"}
# 1 GB by default (~35 s here); RELIABILITY_INGEST_MB makes it smaller or larger.
VOLUME = int(os.environ.get("RELIABILITY_INGEST_MB", "1024")) * 1024 * 1024


def test_api_memory_stays_flat_while_ingesting(database_url: str, tmp_path: Path) -> None:
    api = start_process("api", database_url, tmp_path)
    sample_body = json.dumps([run_event(padding=EVENT_PADDING) for _ in range(BATCH)]).encode()
    requests_needed = VOLUME // len(sample_body) + 1
    lock = threading.Lock()
    sent = acked = 0
    sent_bytes = 0
    failures: list[str] = []
    next_request = iter(range(requests_needed))

    def client() -> None:
        nonlocal sent, acked, sent_bytes
        with httpx.Client(base_url=api.base_url, timeout=60) as http:
            while True:
                with lock:
                    if next(next_request, None) is None:
                        return
                body = json.dumps(
                    [run_event(job="memory", padding=EVENT_PADDING) for _ in range(BATCH)]
                ).encode()
                response = http.post(
                    "/ingest/openlineage/batch",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                with lock:
                    sent += BATCH
                    sent_bytes += len(body)
                    if response.status_code == 200 and response.json()["status"] == "success":
                        acked += BATCH
                    else:
                        failures.append(f"{response.status_code}: {response.text[:200]}")

    baseline = rss_bytes(api.pid)
    started = time.monotonic()
    try:
        # (bytes sent so far, RSS)
        with sampled(lambda: (sent_bytes, rss_bytes(api.pid)), every=0.05) as samples:
            all_at_once(client, CLIENTS)
            elapsed = time.monotonic() - started
    finally:
        api.stop()

    found = log_size(database_url)
    peak = max(rss for _, rss in samples)
    quarter = max(rss for sent_so_far, rss in samples if sent_so_far <= sent_bytes / 4)
    end = max(rss for sent_so_far, rss in samples if sent_so_far >= sent_bytes * 3 / 4)
    print(
        f"\nmemory: {sent_bytes / 1e6:.0f} MB in {sent} events ({requests_needed} batches) "
        f"in {elapsed:.1f} s ({sent_bytes / 1e6 / elapsed:.1f} MB/s); acknowledged {acked}, "
        f"found {found}, lost {acked - found}; API RSS {baseline / 1e6:.0f} MB at start, "
        f"{quarter / 1e6:.0f} MB by 25%, {end / 1e6:.0f} MB in the last quarter, "
        f"peak {peak / 1e6:.0f} MB"
    )
    assert failures == []
    assert found == acked == sent
    assert peak < RSS_BOUND
    assert end - quarter < 50 * 1024 * 1024  # no growth with the volume ingested


# The API holds at most about this many bytes of memory per request byte in flight: the
# body as read and joined, its events, the statement's parameters, and what the allocator
# keeps of them (measured here: peak RSS over the start 3.3 to 3.6 times the budget; it
# was 4.4 while a batch's body stayed referenced until its commit).
BYTES_PER_BUDGET_BYTE = 4
MAXIMAL_CLIENTS = 32


def maximal_batch(max_bytes: int) -> bytes:
    """A batch of MAX_BATCH_EVENTS events, as close to `max_bytes` as they come."""
    per_event = max_bytes // MAX_BATCH_EVENTS
    sample = len(json.dumps(run_event(job="maximal", padding=100))) - 100
    events = [
        run_event(job="maximal", padding=per_event - sample - 2) for _ in range(MAX_BATCH_EVENTS)
    ]
    body = json.dumps(events).encode()
    assert max_bytes - 64 * 1024 < len(body) <= max_bytes, len(body)
    return body


def peak_rss_bytes(pid: int) -> int:
    """VmHWM: the most the process has ever had resident (the kernel's own high-water mark)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def test_concurrent_maximal_batches_keep_the_api_within_its_budget(
    database_url: str, tmp_path: Path
) -> None:
    """32 clients each post a maximal batch (32 MiB, 10,000 events) at once, retrying 503s
    as the OpenLineage clients do: all are stored, and the API's peak RSS stays under its
    start plus BYTES_PER_BUDGET_BYTE times METASTORE_MAX_INFLIGHT_BYTES (562 MiB with the
    defaults here; the same load took 2.4 GiB without the budget, which
    RELIABILITY_INFLIGHT_BYTES=4294967296 shows)."""
    settings = load_settings({})  # the defaults, as deployed
    budget = int(os.environ.get("RELIABILITY_INFLIGHT_BYTES", settings.max_inflight_bytes))
    api = start_process(
        "api", database_url, tmp_path, env={"METASTORE_MAX_INFLIGHT_BYTES": str(budget)}
    )
    body = maximal_batch(settings.max_event_bytes)  # one body, shared by every client
    refusals: list[float] = []
    answers: list[tuple[int, dict[str, Any] | str]] = []

    def client() -> None:
        # What the OpenLineage clients do with a 503: wait Retry-After, send it again.
        with httpx.Client(base_url=api.base_url, timeout=300) as http:
            for _ in range(200):
                response = http.post("/ingest/openlineage/batch", content=body, headers=JSON)
                if response.status_code != 503:
                    break
                refusals.append(float(response.headers["retry-after"]))
                time.sleep(float(response.headers["retry-after"]))
            answers.append(
                (response.status_code, response.json() if response.is_success else response.text)
            )

    try:
        httpx.post(  # warm up: every code path once, so the baseline holds it
            api.base_url + "/ingest/openlineage/batch",
            content=json.dumps([run_event(job="maximal")]).encode(),
            headers=JSON,
            timeout=60,
        )
        baseline = rss_bytes(api.pid)
        started = time.monotonic()
        all_at_once(client, MAXIMAL_CLIENTS)
        elapsed = time.monotonic() - started
        peak = peak_rss_bytes(api.pid)
    finally:
        api.stop()
    bound = baseline + BYTES_PER_BUDGET_BYTE * budget
    print(
        f"\nmaximal batches: {MAXIMAL_CLIENTS} clients x {len(body) / MiB:.1f} MiB in "
        f"{elapsed:.1f} s, {len(refusals)} answers 503 (retried); budget {budget / MiB:.0f} MiB; "
        f"API RSS {baseline / MiB:.0f} MiB at start, peak {peak / MiB:.0f} MiB "
        f"({(peak - baseline) / budget:.2f} x the budget over the start); "
        f"bound {bound / MiB:.0f} MiB"
    )
    assert [status for status, _ in answers] == [200] * MAXIMAL_CLIENTS, answers[:3]
    assert all(
        isinstance(a, dict) and a["summary"]["successful"] == MAX_BATCH_EVENTS for _, a in answers
    )
    assert refusals  # the budget was reached, and its 503s were retried to success
    assert peak < bound


# The export's memory bound, from its page budget. A page holds at most max(PAGE_BYTES =
# 4 MiB, its first event) of stored events, so here each page is one 30 MiB event (the
# largest ingest takes is 32 MiB). Answering, the API holds that page about four times at
# once: libpq's input buffer (kept by the connection), the page's bytes, the body (JSON) or
# the compacted line (NDJSON, pretty-printed events), the socket's send buffer. So the peak
# stays under the start's RSS + 4 x 30 MiB + 32 MiB for the allocator. Before the cap, ten
# 30 MB events in one page took the API to 1.65 GB.
MAXIMAL_EVENT = 30 * 1024 * 1024
EXPORT_RSS_ALLOWANCE = 4 * MAXIMAL_EVENT + 32 * 1024 * 1024


def test_api_memory_is_bounded_by_bytes_while_exporting_maximal_events(
    database_url: str, tmp_path: Path
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        for i in range(10):
            event = run_event(job=f"maximal-{i}")
            event["run"]["facets"]["padding"] = {"data": "x" * MAXIMAL_EVENT}
            # half of them pretty-printed: their NDJSON lines are compacted
            record = log_record(event)
            if i % 2:
                record = msgspec.structs.replace(
                    record, event_json=json.dumps(event, indent=2).encode()
                )
            with conn.transaction():
                append_events(conn, [record])
            del event, record
    api = start_process("api", database_url, tmp_path)
    baseline = rss_bytes(api.pid)
    pages = lines = 0
    started = time.monotonic()
    try:
        with (
            sampled(lambda: rss_bytes(api.pid), every=0.01) as samples,
            httpx.Client(base_url=api.base_url, timeout=120) as client,
        ):
            cursor: str | None = None
            while True:
                params: dict[str, Any] = {"limit": 10, **({"cursor": cursor} if cursor else {})}
                answer = client.get("/export/openlineage/events", params=params)
                assert answer.status_code == 200, answer.text[:300]
                body = answer.json()
                if not body["events"]:
                    break
                pages += 1
                assert len(body["events"]) == 1  # each maximal event ends a page of its own
                cursor = body["next_cursor"]
                del answer, body
            json_peak = max(samples)
            headers = {"Accept": "application/x-ndjson"}
            with client.stream("GET", "/export/openlineage/events", headers=headers) as stream:
                assert stream.status_code == 200
                for line in stream.iter_lines():
                    assert line.startswith("{") and line.endswith("}")
                    lines += 1
        elapsed = time.monotonic() - started
    finally:
        api.stop()
    peak = max(samples)
    mib = 2**20
    print(
        f"\nexport memory: 10 events of {MAXIMAL_EVENT / mib:.0f} MiB in {pages} JSON pages "
        f"and {lines} NDJSON lines in {elapsed:.1f} s; API RSS {baseline / mib:.0f} MiB at "
        f"start, peak {json_peak / mib:.0f} MiB in the JSON pages, {peak / mib:.0f} MiB in all "
        f"(bound {(baseline + EXPORT_RSS_ALLOWANCE) / mib:.0f} MiB)"
    )
    assert pages == lines == 10
    assert peak < baseline + EXPORT_RSS_ALLOWANCE
