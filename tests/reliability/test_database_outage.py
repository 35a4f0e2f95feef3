"""Database outage: PostgreSQL stops for 10 s while emitters post events and readers read.

During the outage the API answers 503 with Retry-After (never another 5xx, never slower
than the clients' 15 s timeout), and once PostgreSQL is back it serves again without a
restart. The real openlineage-python client, retrying, loses nothing.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.transport.http import HttpConfig, HttpTransport

from metastore.embedded_pg import EmbeddedPostgres
from tests.reliability.conftest import PRODUCER, run_event, run_event_counts
from tests.support import start_process

pytestmark = pytest.mark.reliability

HTTP_CLIENTS = 8
OL_CLIENTS = 2
OUTAGE_S = 10.0
CLIENT_TIMEOUT_S = 15.0


class Observed:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.down = threading.Event()  # set while PostgreSQL is stopped
        self.answers: list[tuple[str, int, float, bool, bool]] = []  # what, status, s, down, RA
        self.errors: list[str] = []  # no answer within the timeout, or the connection failed
        self.acked: set[str] = set()
        self.ol_emitted: set[str] = set()
        self.ol_failed: list[str] = []

    def record(self, what: str, response: httpx.Response, elapsed: float) -> None:
        with self.lock:
            self.answers.append(
                (
                    what,
                    response.status_code,
                    elapsed,
                    self.down.is_set(),
                    "retry-after" in response.headers,
                )
            )


def http_emitter(base_url: str, seen: Observed) -> None:
    with httpx.Client(base_url=base_url, timeout=CLIENT_TIMEOUT_S) as http:
        event = run_event(job="outage")
        while not seen.stop.is_set():
            started = time.monotonic()
            try:
                response = http.post("/ingest/openlineage", json=event)
            except httpx.HTTPError as exc:
                with seen.lock:
                    seen.errors.append(f"ingest: {exc!r}")
                continue
            seen.record("ingest", response, time.monotonic() - started)
            if response.is_success:
                with seen.lock:
                    seen.acked.add(event["run"]["runId"])
                event = run_event(job="outage")
            else:
                time.sleep(0.1)  # then the same event again


READ_PATHS = ("/api/v1/namespaces", "/api/v1/jobs?q=' OR 1=1 --", "/export/openlineage/events")


def reader(base_url: str, path: str, seen: Observed) -> None:
    with httpx.Client(base_url=base_url, timeout=CLIENT_TIMEOUT_S) as http:
        while not seen.stop.is_set():
            started = time.monotonic()
            try:
                response = http.get(path)
            except httpx.HTTPError as exc:
                with seen.lock:
                    seen.errors.append(f"{path}: {exc!r}")
                continue
            seen.record(path.split("?")[0], response, time.monotonic() - started)
            time.sleep(0.1)


def ol_emitter(base_url: str, seen: Observed) -> None:
    config = HttpConfig(
        url=base_url,
        endpoint="ingest/openlineage",
        timeout=CLIENT_TIMEOUT_S,
        retry={
            "total": 12,
            "connect": 12,
            "read": 12,
            "status": 12,
            "backoff_factor": 0.5,
            "status_forcelist": [500, 502, 503, 504],
            "allowed_methods": ["POST"],
        },
    )
    client = OpenLineageClient(transport=HttpTransport(config))
    while not seen.stop.is_set():
        run_id = str(uuid.uuid4())
        event = RunEvent(
            eventType=RunState.START,
            eventTime=dt.datetime.now(dt.UTC).isoformat(),
            run=Run(runId=run_id),
            job=Job(namespace="reliability", name="openlineage-python"),
            producer=PRODUCER,
        )
        try:
            client.emit(event)
        except Exception as exc:  # the client gave up: the test reports it
            with seen.lock:
                seen.ol_failed.append(f"{run_id}: {exc!r}")
            continue
        with seen.lock:
            seen.ol_emitted.add(run_id)
        time.sleep(0.02)


def test_an_outage_is_answered_503_and_nothing_is_lost(
    stoppable_postgres: tuple[EmbeddedPostgres, str], tmp_path: Path
) -> None:
    pg, url = stoppable_postgres
    api = start_process("api", url, tmp_path)
    seen = Observed()
    threads = [
        *(
            threading.Thread(target=http_emitter, args=(api.base_url, seen))
            for _ in range(HTTP_CLIENTS)
        ),
        *(
            threading.Thread(target=ol_emitter, args=(api.base_url, seen))
            for _ in range(OL_CLIENTS)
        ),
        *(threading.Thread(target=reader, args=(api.base_url, path, seen)) for path in READ_PATHS),
    ]
    try:
        for thread in threads:
            thread.start()
        time.sleep(2)
        acked_before = len(seen.acked)
        seen.down.set()
        pg.stop()
        time.sleep(OUTAGE_S)
        pg.restart_stopped()
        back = time.monotonic()
        seen.down.clear()
        deadline = back + 30
        while len(seen.acked) < acked_before + 1 or not any(
            s == 200 and not d for w, s, _, d, _ in seen.answers[-50:] if w == "ingest"
        ):
            assert time.monotonic() < deadline, "ingest did not recover after the outage"
            time.sleep(0.05)
        recovered_after = time.monotonic() - back
        time.sleep(3)  # load on the recovered API
    finally:
        seen.stop.set()
        for thread in threads:
            thread.join(timeout=120)
        api.stop()

    during = [a for a in seen.answers if a[3]]
    statuses = Counter((what, status) for what, status, *_ in during)
    unavailable = [a for a in seen.answers if a[1] == 503]
    server_errors = [a for a in seen.answers if a[1] >= 500 and a[1] != 503]
    slowest = max(a[2] for a in during)
    counts = run_event_counts(url)
    found = {run_id for run_id, _ in counts}
    twice = {key: n for key, n in counts.items() if n > 1}
    print(
        f"\ndatabase outage {OUTAGE_S:g} s: {len(seen.answers)} answers, {len(during)} during "
        f"the outage {dict(statuses)}; 503s {len(unavailable)}, all with Retry-After: "
        f"{all(a[4] for a in unavailable)}; slowest answer during the outage {slowest:.2f} s; "
        f"ingest recovered {recovered_after:.2f} s after PostgreSQL was back; "
        f"httpx emitters: {len(seen.acked)} acknowledged, lost {len(seen.acked - found)}; "
        f"openlineage-python: {len(seen.ol_emitted)} emitted, {len(seen.ol_failed)} gave up, "
        f"lost {len(seen.ol_emitted - found)}; stored twice {len(twice)}"
    )
    assert seen.errors == []  # every request was answered within the client's timeout
    assert server_errors == []
    assert all(a[4] for a in unavailable)
    assert any(w == "ingest" and s == 503 for w, s, *_ in during)
    every_endpoint = {"ingest", *(path.split("?")[0] for path in READ_PATHS)}
    assert {w for w, s, *_ in during if s == 503} == every_endpoint
    assert seen.ol_failed == []
    assert seen.acked - found == set()
    assert seen.ol_emitted - found == set()
    assert twice == {}
    for path in READ_PATHS:  # the read API and the feed recovered too
        what = path.split("?")[0]
        assert any(s == 200 for w, s, _, d, _ in seen.answers[-200:] if w == what and not d)
