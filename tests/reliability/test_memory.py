"""Memory: the API's RSS stays bounded while it ingests a lot of events.

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

from metastore.eventlog import append_events
from tests.logdata import log_record
from tests.reliability.conftest import log_size, rss_bytes, run_event
from tests.support import start_process

pytestmark = pytest.mark.reliability

EVENT_PADDING = 2600  # ~3 KB an event
BATCH = 100
CLIENTS = 8
RSS_BOUND = 300 * 1024 * 1024
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

    samples: list[tuple[int, int]] = []  # (bytes sent so far, RSS)
    done = threading.Event()

    def sampler() -> None:
        while not done.is_set():
            samples.append((sent_bytes, rss_bytes(api.pid)))
            time.sleep(0.05)

    baseline = rss_bytes(api.pid)
    watcher = threading.Thread(target=sampler)
    watcher.start()
    started = time.monotonic()
    try:
        threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
    finally:
        done.set()
        watcher.join()
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
    samples: list[int] = []
    done = threading.Event()

    def sampler() -> None:
        while not done.is_set():
            samples.append(rss_bytes(api.pid))
            time.sleep(0.01)

    baseline = rss_bytes(api.pid)
    watcher = threading.Thread(target=sampler)
    watcher.start()
    pages = lines = 0
    started = time.monotonic()
    try:
        with httpx.Client(base_url=api.base_url, timeout=120) as client:
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
        done.set()
        watcher.join()
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
