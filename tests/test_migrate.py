"""`metastore migrate` as an operator meets it: a role without the privileges it needs is
told, within seconds and in one line, what is missing and the statement that grants it;
while another migrator holds the lock it says who; a database error is one line.

The roles are real roles of the test PostgreSQL (15), made per test and dropped after.
"""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from metastore import migrations
from metastore.migrations import MIGRATION_LOCK, MigrationFailed, apply_migrations
from tests.conftest import Server

FIX_PREFIX = "as a superuser run: "


def migrate(
    url: str, timeout: float = 30, **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "migrate"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "METASTORE_DATABASE_URL": url, "METASTORE_LOG_FORMAT": "text", **env},
    )
    return result, time.monotonic() - started


class Setup:
    """A role (LOGIN, nothing else) and a database it does not own, on the test server."""

    def __init__(self, pg_server: Server) -> None:
        suffix = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.role = f"migrator_{suffix}"
        self.database = f"migrated_{suffix}"
        self.pg_server = pg_server

    def admin(self, dbname: str | None = None) -> psycopg.Connection[Any]:
        """The test server's superuser, on our database (or `postgres`)."""
        return psycopg.connect(self.pg_server.url(dbname or self.database), autocommit=True)

    def url(self) -> str:
        parts = self.pg_server.parts
        netloc = f"{self.role}@{self.pg_server.host}:{self.pg_server.port}"
        return parts._replace(netloc=netloc, path="/" + self.database).geturl()


@pytest.fixture
def setup(pg_server: Server) -> Iterator[Setup]:
    s = Setup(pg_server)
    with s.admin("postgres") as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(s.role)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(s.database)))
    try:
        yield s
    finally:
        with s.admin("postgres") as admin:
            admin.execute(
                sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(s.database))
            )
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(s.role)))


def q(name: str) -> str:
    return f'"{name}"'


# What the operator did before (as a superuser), and what migrate then says is missing.
CASES: dict[str, tuple[Callable[[Setup], list[str]], str, Callable[[Setup], str]]] = {
    "connect-only": (
        lambda s: [],
        'lacks CREATE on schema "public" and CREATE on database {database}',
        lambda s: f"ALTER DATABASE {q(s.database)} OWNER TO {q(s.role)};",
    ),
    "create-on-database-only": (
        lambda s: [f"GRANT CREATE ON DATABASE {q(s.database)} TO {q(s.role)}"],
        'lacks CREATE on schema "public", which',
        lambda s: f'GRANT CREATE ON SCHEMA "public" TO {q(s.role)};',
    ),
    "create-on-public-only": (
        lambda s: [f"GRANT CREATE ON SCHEMA public TO {q(s.role)}"],
        "lacks CREATE on database {database}, which",
        lambda s: f"GRANT CREATE ON DATABASE {q(s.database)} TO {q(s.role)};",
    ),
}


@pytest.mark.parametrize("case", CASES, ids=CASES)
def test_a_role_without_privileges_is_told_in_one_line_what_fixes_it(
    setup: Setup, case: str
) -> None:
    before, missing, fix = CASES[case]
    with setup.admin() as admin:
        for statement in before(setup):
            admin.execute(statement)
    result, seconds = migrate(setup.url())
    print(f"\n{case}: exit {result.returncode} after {seconds:.2f} s: {result.stderr.strip()}")
    assert result.returncode == 3
    assert seconds < 10  # not yoyo's 300 s lock wait
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"metastore: role {q(setup.role)} ")
    assert missing.format(database=q(setup.database)) in line
    assert line.endswith(FIX_PREFIX + fix(setup))
    # The statement it names is the fix: run as a superuser, migrate then succeeds.
    with setup.admin() as admin:
        admin.execute(line.split(FIX_PREFIX, 1)[1])
    result, _ = migrate(setup.url())
    assert result.returncode == 0, result.stderr
    assert "the schema is current" in result.stdout


def test_tables_of_another_role_are_named(setup: Setup) -> None:
    apply_migrations(setup.pg_server.url(setup.database))  # as the superuser
    with setup.admin() as admin:
        admin.execute(f"ALTER DATABASE {q(setup.database)} OWNER TO {q(setup.role)}")
    result, _ = migrate(setup.url())
    assert result.returncode == 2  # the wrong role runs it: a configuration mistake
    (line,) = result.stderr.strip().splitlines()
    owner = setup.pg_server.user
    assert f"they belong to role {q(owner)}; run `metastore migrate` as {q(owner)}" in line


def test_a_process_role_that_does_not_exist_is_a_configuration_mistake(
    empty_database_url: str,
) -> None:
    result, _ = migrate(empty_database_url, METASTORE_API_ROLE="metastore_apii")
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line == (
        "metastore: METASTORE_API_ROLE='metastore_apii': no such role in the database server; "
        "create it first (README, Install)"
    )


def test_a_database_error_is_one_line(setup: Setup) -> None:
    url = setup.url().replace(setup.database, setup.database + "_missing")
    result, _ = migrate(url)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("metastore: cannot reach the database: ")
    assert f'database "{setup.database}_missing" does not exist' in line


def test_a_failed_migration_is_named_in_one_line(empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE event_log (x int)")  # in the way of the first migration
    result, _ = migrate(empty_database_url)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"metastore: migration {migrations.migration_ids()[0]} failed and was rolled back: "
        'relation "event_log" already exists'
    )
    assert "Traceback" not in result.stderr


def holding_the_lock(url: str) -> psycopg.Connection[Any]:
    holder = psycopg.connect(url, autocommit=True, application_name="holder-of-the-lock")
    holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    return holder


def test_a_migrator_waiting_for_the_lock_says_who_holds_it(empty_database_url: str) -> None:
    holder = holding_the_lock(empty_database_url)
    (pid,) = holder.execute("SELECT pg_backend_pid()").fetchone() or (0,)
    env = {
        **os.environ,
        "METASTORE_DATABASE_URL": empty_database_url,
        "METASTORE_LOG_FORMAT": "text",
    }
    waiting = subprocess.Popen(
        [sys.executable, "-m", "metastore", "migrate"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert waiting.stderr is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: lines.put(waiting.stderr.readline()), daemon=True).start()
        line = lines.get(timeout=15)  # logged at once, then every 10 s
        print(f"\n{line.strip()}")
        assert "WARNING metastore.migrations waiting for the migration lock, held by " in line
        assert f"PostgreSQL backend {pid} (application 'holder-of-the-lock', user " in line
        assert "waited_s=0" in line
        holder.close()  # the holder goes away: its lock with it
        out, rest = waiting.communicate(timeout=30)
        err = line + rest
    finally:
        holder.close()
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == 0, err
    assert "the schema is current" in out


def test_the_wait_is_logged_every_interval_and_given_up_naming_the_holder(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(migrations, "LOCK_LOG_EVERY_S", 0.3)
    monkeypatch.setattr(migrations, "LOCK_TIMEOUT_S", 1.0)
    monkeypatch.setattr(migrations, "LOCK_POLL_S", 0.05)
    with (
        holding_the_lock(empty_database_url),
        caplog.at_level(logging.WARNING),
        pytest.raises(
            MigrationFailed,
            match=r"gave up after 1 s waiting for the migration lock, held by PostgreSQL "
            r"backend \d+ \(application 'holder-of-the-lock'",
        ),
    ):
        apply_migrations(empty_database_url)
    waits = [r for r in caplog.records if "waiting for the migration lock" in r.getMessage()]
    assert 3 <= len(waits) <= 5
    assert [r.__dict__["waited_s"] for r in waits][:2] == [0, 0]  # 0.0 s, 0.3 s


def test_two_migrators_one_after_the_other_under_the_lock(empty_database_url: str) -> None:
    holder = holding_the_lock(empty_database_url)
    done: list[list[str]] = []
    worker = threading.Thread(target=lambda: done.append(apply_migrations(empty_database_url)))
    worker.start()
    time.sleep(0.5)
    assert not done  # still waiting
    holder.close()
    worker.join(timeout=30)
    assert done and done[0] == migrations.migration_ids()
