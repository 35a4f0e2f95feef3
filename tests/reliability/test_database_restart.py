"""The database as pods meet it on Kubernetes: down, hung, refusing, restarted, or not there
yet when a pod starts.

- /readyz answers within a second whatever the database does (the chart's probe times out
  after 3 s), and the pods are ready again when it is back.
- After a PostgreSQL restart the first read and the first ingest succeed: the pools drop
  the connections the restart closed before handing them out.
- `api` and `projector` started while the database cannot be reached stay up (/healthz
  200, /readyz 503), log that they wait, and serve once it comes; a schema behind the
  code still stops `api`, once the database answers.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path

import httpx
import psycopg
import pytest

from metastore.embedded_pg import EmbeddedPostgres
from tests.reliability.conftest import migrated_cluster, run_event
from tests.support import Process, running, start_process

pytestmark = pytest.mark.reliability

# The longest a probe may wait for /readyz here: the process answers after at most 0.9 s;
# the rest is slack for a loaded machine (the chart's probe allows 3 s).
READY_ANSWER_S = 1.5


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[EmbeddedPostgres, str]]:
    with migrated_cluster() as pg_and_url:
        yield pg_and_url


def postgres_pids(pg: EmbeddedPostgres) -> list[int]:
    """The postmaster and every process it started."""
    postmaster = int((pg.pgdata / "postmaster.pid").read_text().split()[0])
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            children.append(int(stat.parent.name))
    return [postmaster, *children]


@contextmanager
def database_down(pg: EmbeddedPostgres, url: str) -> Iterator[None]:
    pg.stop()
    try:
        yield
    finally:
        pg.restart_stopped()


@contextmanager
def database_hung(pg: EmbeddedPostgres, url: str) -> Iterator[None]:
    """Every server process stopped: connections are accepted (by the kernel) and queries
    sent, but nothing answers."""
    pids = postgres_pids(pg)  # the postmaster first: it forks nothing once stopped
    for pid in pids:
        with suppress(ProcessLookupError):  # a backend that has just ended
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@contextmanager
def database_refusing(pg: EmbeddedPostgres, url: str) -> Iterator[None]:
    """The server answers, but refuses connections to the database (and ended those open)."""
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("ALTER DATABASE metastore ALLOW_CONNECTIONS false")
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'metastore'"
        )
        try:
            yield
        finally:
            conn.execute("ALTER DATABASE metastore ALLOW_CONNECTIONS true")


STATES: dict[str, Callable[[EmbeddedPostgres, str], AbstractContextManager[None]]] = {
    "down": database_down,
    "hung": database_hung,
    "refusing": database_refusing,
}


def wait_for_status(process: Process, path: str, status: int, timeout: float = 20.0) -> float:
    """Seconds until `path` answered `status`."""
    started = time.monotonic()
    while True:
        assert process.popen.poll() is None, process.output()[-3000:]
        try:
            if httpx.get(process.base_url + path, timeout=5).status_code == status:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        assert time.monotonic() - started < timeout, f"{path}:\n{process.output()[-3000:]}"
        time.sleep(0.05)


def wait_ready(process: Process) -> float:
    return wait_for_status(process, "/readyz", 200)


def probe(process: Process, path: str) -> tuple[int, float, dict[str, object]]:
    started = time.monotonic()
    answer = httpx.get(process.base_url + path, timeout=10)
    return answer.status_code, time.monotonic() - started, answer.json()


def test_readyz_answers_within_a_second_whatever_the_database_does(
    cluster: tuple[EmbeddedPostgres, str], tmp_path: Path
) -> None:
    pg, url = cluster
    with running("api", url, tmp_path) as api, running("projector", url, tmp_path) as projector:
        for process in (api, projector):
            wait_ready(process)
        for state, make in STATES.items():
            with make(pg, url):
                for process, what in ((api, "api"), (projector, "projector")):
                    for attempt in (1, 2):  # the second meets the first one's leftovers
                        status, seconds, body = probe(process, "/readyz")
                        print(f"\n{state}: {what} /readyz {status} in {seconds:.2f} s: {body}")
                        assert status == 503, body
                        assert seconds < READY_ANSWER_S, (state, what, attempt, seconds)
                    assert probe(process, "/healthz")[0] == 200
            for process in (api, projector):
                print(f"{state}: {process.base_url} ready again after {wait_ready(process):.2f} s")


def test_the_first_read_and_ingest_after_a_restart_succeed(
    cluster: tuple[EmbeddedPostgres, str], tmp_path: Path
) -> None:
    pg, url = cluster
    with running("api", url, tmp_path) as api, httpx.Client(base_url=api.base_url) as http:
        # Every pool holds connections now, the read pool most it may (METASTORE_POOL_SIZE).
        assert http.post("/ingest/openlineage", json=run_event(job="before")).status_code == 200
        with ThreadPoolExecutor(16) as readers:
            reads = readers.map(lambda _: httpx.get(api.base_url + "/api/v1/namespaces"), range(16))
            assert {r.status_code for r in reads} == {200}
        pg.stop()
        pg.restart_stopped()
        started = time.monotonic()
        read = http.get("/api/v1/namespaces")
        read_s = time.monotonic() - started
        export = http.get("/export/openlineage/events")
        ingest = http.post("/ingest/openlineage", json=run_event(job="after"))
        print(f"\nafter the restart: the first read took {read_s:.2f} s")
        assert (read.status_code, export.status_code, ingest.status_code) == (200, 200, 200), (
            read.text,
            export.text,
            ingest.text,
        )
        # Not one dead connection after another behind psycopg_pool's back-off between failed
        # checks (0, then 0.9-1.1 s, then twice that: 2.7 s by the fourth one).
        assert read_s < 1.0


def test_api_and_projector_started_before_the_database_wait_for_it(
    cluster: tuple[EmbeddedPostgres, str], tmp_path: Path
) -> None:
    pg, url = cluster
    behind_url = url.rsplit("/", 1)[0] + "/never_migrated"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS never_migrated")
        conn.execute("CREATE DATABASE never_migrated")
    processes: list[Process] = []
    try:
        with database_down(pg, url):
            api = start_process("api", url, tmp_path, wait_path=None)
            projector = start_process("projector", url, tmp_path, wait_path=None)
            behind = start_process("api", behind_url, tmp_path, wait_path=None)
            processes = [api, projector, behind]
            for process in processes:  # up: /healthz answers 200
                wait_for_status(process, "/healthz", 200)
            for process in processes:
                status, seconds, body = probe(process, "/readyz")
                assert status == 503 and seconds < READY_ANSWER_S, body
            deadline = time.monotonic() + 10
            while not all("waiting for the database" in p.output() for p in processes):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            for process in processes:
                assert process.popen.poll() is None
        # The database is back.
        for process in (api, projector):
            print(f"\nready {wait_ready(process):.2f} s after the database came")
        assert behind.popen.wait(timeout=20) == 1
        assert "run `metastore migrate`" in behind.output()
        with httpx.Client(base_url=api.base_url) as http:
            assert http.post("/ingest/openlineage", json=run_event(job="late")).status_code == 200
            deadline = time.monotonic() + 20
            while http.get("/api/v1/jobs", params={"q": "late"}).json()["items"] == []:
                assert time.monotonic() < deadline, projector.output()
                time.sleep(0.1)
        for process, what in ((api, "api"), (projector, "projector")):
            lines = [line for line in process.output().splitlines() if "metastore.startup" in line]
            print(f"{what}:\n" + "\n".join(lines))
            assert (
                lines[0]
                .split(" ", 2)[2]
                .startswith(
                    "WARNING metastore.startup waiting for the database: connection failed: "
                    'connection to server at "127.0.0.1", port '
                )
            )
            assert lines[0].endswith("Connection refused waited_s=0")
            assert "INFO    metastore.startup the database is reachable waited_s=" in lines[-1]
    finally:
        for process in processes:
            process.stop()
