"""Crash under load: the API is killed with SIGKILL while 32 clients post events.

A 2xx means committed: every acknowledged event must be in the log afterwards, none twice.
The clients behave like real emitters: an event whose request failed is sent again (to the
restarted API), so the log's deduplication is exercised by events that were committed but
never acknowledged.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.reliability.conftest import run_event, run_event_counts
from tests.support import start_process

pytestmark = pytest.mark.reliability

CLIENTS = 32
ACKED_BEFORE_KILL = 1500
ACKED_AFTER_RESTART = 500  # more acknowledgements from the restarted API before stopping


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = 0  # requests sent, retries included
        self.acked: set[str] = set()  # runIds answered 2xx
        self.failed_requests = 0  # connection errors and 5xx (the kill, the restart)
        self.other: list[int] = []  # any other answer: a bug
        self.stop = threading.Event()


def client(base_url: str, tally: Tally) -> None:
    with httpx.Client(base_url=base_url, timeout=15) as http:
        event: dict[str, object] | None = None
        while not tally.stop.is_set():
            if event is None:
                event = run_event(job="crash")
            body = json.dumps(event)
            with tally.lock:
                tally.sent += 1
            try:
                response = http.post(
                    "/ingest/openlineage",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
            except httpx.HTTPError:
                with tally.lock:
                    tally.failed_requests += 1
                time.sleep(0.05)
                continue  # the same event again
            if response.is_success:
                with tally.lock:
                    tally.acked.add(event["run"]["runId"])  # type: ignore[index]
                event = None
            elif response.status_code == 503:
                with tally.lock:
                    tally.failed_requests += 1
                time.sleep(0.05)
            else:
                with tally.lock:
                    tally.other.append(response.status_code)
                event = None


def wait_for_acks(tally: Tally, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(tally.acked) < count:
        assert time.monotonic() < deadline, f"only {len(tally.acked)} of {count} acknowledged"
        time.sleep(0.01)


def test_every_acknowledged_event_survives_a_sigkill_of_the_api_exactly_once(
    database_url: str, tmp_path: Path
) -> None:
    api = start_process("api", database_url, tmp_path)
    port = int(api.base_url.rsplit(":", 1)[1])
    tally = Tally()
    threads = [threading.Thread(target=client, args=(api.base_url, tally)) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    try:
        wait_for_acks(tally, ACKED_BEFORE_KILL, timeout=120)
        api.kill(signal.SIGKILL)
        acked_at_kill = len(tally.acked)
        # Committed when the API died, never answered: their retries must not store twice.
        stored_at_kill = {run_id for run_id, _ in run_event_counts(database_url)}
        with tally.lock:
            unanswered_at_kill = len(stored_at_kill - tally.acked)
        api = start_process("api", database_url, tmp_path, port=port)
        wait_for_acks(tally, acked_at_kill + ACKED_AFTER_RESTART, timeout=120)
    finally:
        tally.stop.set()
        for thread in threads:
            thread.join()
        api.stop()

    counts = run_event_counts(database_url)
    found = {run_id for (run_id, _), n in counts.items() if n >= 1}
    lost = tally.acked - found
    twice = {run_id: n for (run_id, _), n in counts.items() if n > 1}
    unacked_stored = found - tally.acked  # in flight at the stop: committed, not answered
    print(
        f"\ncrash under load: {CLIENTS} clients, {tally.sent} requests sent, "
        f"{len(tally.acked)} acknowledged ({acked_at_kill} before the SIGKILL, "
        f"{unanswered_at_kill} committed but unanswered at it), "
        f"{tally.failed_requests} failed and retried, "
        f"{len(found)} events in the log, lost {len(lost)}, stored twice {len(twice)}, "
        f"stored but never acknowledged {len(unacked_stored)}"
    )
    assert tally.other == []
    assert tally.failed_requests > 0, "the kill did not interrupt any request"
    assert lost == set()
    assert twice == {}
    # Only the requests still open when the clients stopped may be stored unanswered.
    assert len(unacked_stored) <= CLIENTS
