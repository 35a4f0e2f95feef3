"""Backup and restore as the README's "Backup and restore" says, into a new PostgreSQL
server whose transaction counter is far behind the old one's (issue 43, item 1): the
restored events are read, new ones are folded after them, an export cursor handed out
before the backup continues, and `metastore replay` keeps every event. Real processes
throughout: two PostgreSQL servers, pg_dump and pg_restore, `metastore migrate`, `api`,
`projector` and `replay`, each as the README's role.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from metastore.embedded_pg import EmbeddedPostgres
from metastore.eventlog import (
    START,
    Position,
    StoredEvent,
    append_events,
    catch_up_order,
    read_events_after,
)
from projections.runner import catch_up as fold_everything
from tests.conftest import Server
from tests.logdata import append, dump_readmodel, log_record
from tests.reliability.conftest import run_event
from tests.support import ROOT, ReadmeInstall, conformance_events, running
from tests.test_replay import replay_command

# The servers the README's commands name (as the owner, as a superuser), replaced by ours.
README_URLS = (
    "'postgresql://metastore@postgresql.databases.svc.cluster.local/metastore'",
    "'postgresql://postgres@postgresql.databases.svc.cluster.local/metastore'",
)
# Transactions burnt on the old server before the events are appended, so that their
# positions lie far past a new server's counter (a few hundred after initdb and restore).
BURNT_XIDS = 5000
BEFORE = conformance_events("scenarios/spark_dataproc_bigquery_shakespare")
AFTER = conformance_events("scenarios/airflow")[:8]


def readme_commands(name: str, url: str) -> str:
    """The README's `<!-- name -->` shell block, run against `url`."""
    found = re.search(
        rf"<!-- {re.escape(name)}[^>]*-->\n```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S
    )
    assert found, f"README.md has no <!-- {name} --> block"
    commands = found.group(1)
    (named,) = [u for u in README_URLS if u in commands]
    return commands.replace(named, shlex.quote(url))


def run_readme_commands(name: str, url: str, bindir: Path, cwd: Path) -> None:
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", readme_commands(name, url)],
        cwd=cwd,
        env={"PATH": f"{bindir}:/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{name}: {result.stderr}"


def burn_transaction_ids(superuser_url: str, count: int) -> None:
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "DO $$ BEGIN FOR i IN 1..{} LOOP PERFORM pg_current_xact_id(); COMMIT; "
                "END LOOP; END $$"
            ).format(sql.Literal(count))
        )


def wait_for(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, what()
        time.sleep(0.1)
    return result


@contextmanager
def service(install: ReadmeInstall, log_dir: Path) -> Iterator[httpx.Client]:
    """`metastore projector` and `api`, each as its README role, and a client of the API."""
    with (
        running("projector", install.url(install.projector), log_dir),
        running("api", install.url(install.api), log_dir) as api,
        httpx.Client(base_url=api.base_url, timeout=30) as http,
    ):
        wait_for(lambda: http.get("/readyz").status_code == 200, lambda: "api not ready")
        yield http


def status(http: httpx.Client) -> dict[str, Any]:
    answer = http.get("/api/v1/status")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def folded_all(http: httpx.Client, events: int) -> bool:
    now = status(http)
    return now["log"]["events"] == events and all(
        p["events_folded"] == events and p["lag_events"] == 0 for p in now["projections"]
    )


def export(http: httpx.Client, cursor: str | None = None) -> tuple[list[Any], str]:
    params = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
    answer = http.get("/export/openlineage/events", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()["events"], answer.json()["next_cursor"]


def job_names(http: httpx.Client) -> set[str]:
    answer = http.get("/api/v1/jobs", params={"limit": "200"})
    assert answer.status_code == 200, answer.text
    return {job["name"] for job in answer.json()["items"]}


def ingest(http: httpx.Client, events: list[dict[str, Any]]) -> None:
    answer = http.post("/ingest/openlineage/batch", json=events)
    assert answer.status_code == 200, answer.text


@contextmanager
def new_server() -> Iterator[Server]:
    """A freshly initialised PostgreSQL cluster of its own (its own transaction counter)."""
    embedded = EmbeddedPostgres(
        Path(tempfile.mkdtemp(prefix="metastore-restore-", dir="/tmp")), fast_unsafe=True
    )
    try:
        yield Server(embedded.start(), embedded)
    finally:
        embedded.destroy()


@pytest.mark.parametrize("backup", ["log", "all"])
def test_restore_into_a_new_server_keeps_the_log_in_order(
    backup: str, readme_install: ReadmeInstall, pg_server: Server, tmp_path: Path
) -> None:
    """`log`: the owner's backup of the log, the read models rebuilt after the restore;
    `all`: a superuser's of the whole database, the read models and their cursors with it."""
    old = readme_install
    old.run_sql()
    assert old.migrate().returncode == 0
    burn_transaction_ids(pg_server.url("postgres"), BURNT_XIDS)
    with service(old, tmp_path) as http:
        ingest(http, BEFORE)
        backed_up = status(http)["log"]["events"]
        wait_for(lambda: folded_all(http, backed_up), lambda: status(http))
        # A consumer of the feed has read everything; its cursor is all it keeps.
        exported, consumer_cursor = export(http)
        assert len(exported) == backed_up
        jobs_before = job_names(http)
    with new_server() as server:
        assert server.embedded is not None
        bindir = server.embedded.bindir
        if backup == "log":
            run_readme_commands("backup.sh", old.url(old.owner), bindir, tmp_path)
        else:
            run_readme_commands("backup-all.sh", pg_server.url(old.database), bindir, tmp_path)
        new = ReadmeInstall(server)
        new.owner, new.api, new.projector, new.database = (
            old.owner,
            old.api,
            old.projector,
            old.database,
        )
        new.run_sql()
        if backup == "log":
            run_readme_commands("restore.sh", new.url(new.owner), bindir, tmp_path)
        else:
            run_readme_commands("restore-all.sh", server.url(new.database), bindir, tmp_path)
        with psycopg.connect(new.url(new.owner), autocommit=True) as conn:
            counter, last = conn.execute(
                "SELECT pg_current_xact_id()::text::bigint, max(tx::text::bigint) FROM event_log"
            ).fetchone() or (0, 0)
        assert counter + BURNT_XIDS // 2 < last, "the new server's counter is not behind"
        migrated = new.migrate()
        assert migrated.returncode == 0, migrated.stderr

        with service(new, tmp_path) as http:
            # The restored events are in every answer (folded again without the read models).
            wait_for(lambda: folded_all(http, backed_up), lambda: status(http))
            assert job_names(http) == jobs_before
            # New events are accepted, folded and answered, after the restored ones.
            ingest(http, AFTER)
            total = status(http)["log"]["events"]
            assert total > backed_up
            wait_for(lambda: folded_all(http, total), lambda: status(http))
            assert {e["job"]["name"] for e in AFTER} <= job_names(http)
            everything, _ = export(http)
            assert everything[:backed_up] == exported
            assert [e["run"]["runId"] for e in everything[backed_up:]] == [
                e["run"]["runId"] for e in AFTER
            ]
            # A consumer's cursor from before the backup gets exactly the new events.
            assert export(http, consumer_cursor)[0] == everything[backed_up:]

            replayed = replay_command(new.url(new.projector))
            assert replayed.returncode == 0, replayed.stderr
            assert f"replayed {total:,} events" in replayed.stdout
            assert folded_all(http, total), status(http)
            assert {e["job"]["name"] for e in AFTER} | jobs_before == job_names(http)


def test_replay_refuses_to_swap_in_fewer_events_than_the_live_tables(
    conn: psycopg.Connection[Any], database_url: str
) -> None:
    append(conn, BEFORE)
    folded = fold_everything(conn)
    before = dump_readmodel(conn)
    # The month's partition detached (what an operator does with old months): the log now
    # reads back none of the events the live tables hold.
    (partition,) = conn.execute(
        "SELECT tableoid::regclass::text FROM event_log GROUP BY 1"
    ).fetchone() or ("",)
    conn.execute(
        sql.SQL("ALTER TABLE event_log DETACH PARTITION {}").format(sql.Identifier(partition))
    )

    refused = replay_command(database_url)
    assert refused.returncode == 1, refused.stdout
    assert (
        "replay refused: the rebuilt column_lineage accounts for 0 events, the live tables "
        f"for {folded:,}" in refused.stderr
    )
    assert dump_readmodel(conn) == before
    assert conn.execute("SELECT min(events_folded) FROM projection_state").fetchone() == (folded,)


def test_the_processes_move_the_order_themselves_when_no_migrate_follows_a_move(
    conn: psycopg.Connection[Any], database_url: str, tmp_path: Path
) -> None:
    # What a move to a server 1,000,000 transactions behind leaves, with no `migrate` after
    # it (a logical replica promoted, say): the log's positions far past the counter.
    conn.execute("UPDATE event_log_clock SET xid_offset = 1000000")
    append(conn, BEFORE)
    conn.execute("UPDATE event_log_clock SET xid_offset = 0")
    with (
        running("api", database_url, tmp_path) as api,
        httpx.Client(base_url=api.base_url, timeout=30) as http,
    ):
        # The api alone: its ingest connections move the order before their first append.
        ingest(http, AFTER)
        everything, _ = export(http)
        assert [e["run"]["runId"] for e in everything] == [
            e["run"]["runId"] for e in BEFORE + AFTER
        ]
        with running("projector", database_url, tmp_path):
            wait_for(lambda: folded_all(http, len(everything)), lambda: status(http))


def test_a_raise_waits_for_appends_keyed_by_the_old_offset_so_no_reader_skips_them(
    conn: psycopg.Connection[Any], database_url: str
) -> None:
    # A store moved in while the server kept taking events (logical replication catching
    # up, say): an append keyed by the old offset is open when rows far ahead arrive.
    with psycopg.connect(database_url) as writer:
        early = run_event(job="early")
        append_events(writer, [log_record(early)])  # open: keyed by offset 0
        conn.execute("UPDATE event_log_clock SET xid_offset = 1000000")
        append(conn, BEFORE)
        conn.execute("UPDATE event_log_clock SET xid_offset = 0")
        reader = read_after(database_url, START)  # neither is readable yet
        with ThreadPoolExecutor(1) as pool, psycopg.connect(database_url) as raiser:
            raised = pool.submit(catch_up_order, raiser)
            time.sleep(1)
            # (Readers and appenders queue behind it meanwhile.)
            assert not raised.done(), "the raise did not wait for the open append"
            writer.commit()
            assert raised.result(timeout=30) > 0
    later = run_event(job="later")
    append(conn, [later])
    # Nothing was passed: the open append's event, the moved-in ones, then the new one.
    reader += read_after(database_url, reader[-1].position if reader else START)
    assert [e.event["run"]["runId"] for e in reader] == [
        e["run"]["runId"] for e in [early, *BEFORE, later]
    ]


def read_after(database_url: str, after: Position) -> list[StoredEvent]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return read_events_after(conn, after, 1000)
