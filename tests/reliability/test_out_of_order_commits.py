"""Out-of-order commits: appends whose transactions commit out of sequence order.

Over many randomized rounds, several transactions append (taking their ids and `seq`s in
one order) and commit in another, while three readers read between the commits: the log
reader (`read_events_after`), the projector (`catch_up`) and the export feed over HTTP.
Each must end up with every event exactly once: a cursor that moved past a row whose
transaction committed later would skip it forever.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import httpx
import psycopg
import pytest

from metastore.eventlog import START, append_events, read_events_after
from projections.runner import catch_up
from projections.schema import PROJECTIONS
from tests.logdata import log_record
from tests.reliability.conftest import run_event
from tests.support import Process

pytestmark = pytest.mark.reliability

ROUNDS = 50
MAX_WRITERS = 6
FEED = "/export/openlineage/events"


class LogReader:
    def __init__(self, database_url: str) -> None:
        self.conn = psycopg.connect(database_url, autocommit=True)
        self.position = START
        self.seen: list[str] = []

    def step(self, rng: random.Random) -> None:
        while events := read_events_after(self.conn, self.position, rng.randint(1, 7)):
            self.seen += [e.event["run"]["runId"] for e in events]
            self.position = events[-1].position


class FeedReader:
    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.cursor = ""
        self.seen: list[str] = []

    def step(self, rng: random.Random) -> None:
        while True:
            page = self.http.get(FEED, params={"cursor": self.cursor, "limit": rng.randint(1, 7)})
            assert page.status_code == 200, page.text
            body = page.json()
            self.seen += [e["run"]["runId"] for e in body["events"]]
            self.cursor = body["next_cursor"]
            if not body["events"]:
                return


def test_appends_committed_out_of_order_are_all_read_folded_and_exported_once(
    database_url: str, api: Process
) -> None:
    seed = int(os.environ.get("RELIABILITY_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    writers = [psycopg.connect(database_url) for _ in range(MAX_WRITERS)]
    log_reader = LogReader(database_url)
    http = httpx.Client(base_url=api.base_url, timeout=30)
    feed = FeedReader(http)
    folded = 0

    def fold(rng: random.Random) -> None:
        nonlocal folded
        folded += catch_up(database_url, limit=rng.randint(1, 9))

    readers: list[Callable[[random.Random], None]] = [log_reader.step, feed.step, fold]
    appended: list[str] = []
    out_of_order = 0
    try:
        for round_no in range(ROUNDS):
            active = rng.sample(writers, rng.randint(2, MAX_WRITERS))
            # Some transactions take their id before any of them writes, in another order.
            for conn in rng.sample(active, rng.randint(0, len(active))):
                conn.execute("SELECT pg_current_xact_id()")
            written: dict[int, list[str]] = {}
            for index in rng.sample(range(len(active)), len(active)):
                events = [run_event(job=f"round-{round_no}") for _ in range(rng.randint(1, 3))]
                append_events(active[index], [log_record(e) for e in events])
                written[index] = [e["run"]["runId"] for e in events]
                if rng.random() < 0.3:
                    rng.choice(readers)(rng)
            commit_order = rng.sample(range(len(active)), len(active))
            out_of_order += commit_order != sorted(commit_order)
            for index in commit_order:
                active[index].commit()
                appended += written[index]
                for read in rng.sample(readers, rng.randint(0, len(readers))):
                    read(rng)
            for read in readers:  # all committed: every reader has everything so far
                read(rng)
            assert sorted(log_reader.seen) == sorted(appended), (seed, round_no)
            assert sorted(feed.seen) == sorted(appended), (seed, round_no)
            assert folded == len(appended), (seed, round_no)
    finally:
        http.close()
        log_reader.conn.close()
        for conn in writers:
            conn.close()

    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT name, events_folded FROM projection_state").fetchall()
        state: dict[str, int] = dict(rows)
        row = conn.execute("SELECT count(*) FROM readmodel.runs").fetchone()
    print(
        f"\nout-of-order commits (seed {seed}): {ROUNDS} rounds, {out_of_order} committed out "
        f"of order, {len(appended)} events appended; log reader {len(log_reader.seen)}, "
        f"export feed {len(feed.seen)}, folded {folded}; skipped 0, repeated 0"
    )
    assert len(set(appended)) == len(appended)
    assert out_of_order > ROUNDS // 2  # the rounds did commit out of order
    assert state == {p.NAME: len(appended) for p in PROJECTIONS}
    assert row == (len(appended),)  # every run folded into the read model
