"""A refused login, as an operator meets it: a wrong password in the Secret (PGPASSWORD).
`metastore api` and `metastore projector` (real processes) try again after 1 s, 2 s, 4 s ...
rather than some 134 times a minute, their /readyz names the refusal (never the password),
the log says it at each attempt with the next wait, and once the server takes the password
(here the role's password is set to the Secret's), both are ready without a restart.

The test server trusts every login; a line of pg_hba.conf asks this test's role alone for
its password (scram-sha-256).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql

from metastore.login import LoginGate, LoginRefused
from tests.conftest import Server
from tests.support import running

SECRET = "the-secret's-password"


class PasswordRole:
    """A superuser role (privileges are not what this is about) that must log in with a
    password, on a migrated database of its own."""

    def __init__(self, pg_server: Server, database_url: str) -> None:
        assert pg_server.embedded is not None
        self.name = f"pw_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.server_log = pg_server.embedded.logfile
        self.hba = pg_server.embedded.pgdata / "pg_hba.conf"
        self.admin_url = database_url
        netloc = f"{self.name}@{pg_server.host}:{pg_server.port}"
        self.url = database_url.replace(pg_server.parts.netloc, netloc, 1)

    def set_password(self, password: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(self.name), sql.Literal(password)
                )
            )

    def refusals(self) -> int:
        """The server's log lines of a refused login of this role."""
        needle = f'password authentication failed for user "{self.name}"'
        return self.server_log.read_text(errors="replace").count(needle)


@pytest.fixture
def role(pg_server: Server, database_url: str) -> Iterator[PasswordRole]:
    if pg_server.embedded is None:
        pytest.skip("needs the embedded test server (its pg_hba.conf)")
    role = PasswordRole(pg_server, database_url)
    line = f'host all "{role.name}" 127.0.0.1/32 scram-sha-256\n'
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD 'not-the-secret'").format(
                sql.Identifier(role.name)
            )
        )
        role.hba.write_text(line + role.hba.read_text())
        admin.execute("SELECT pg_reload_conf()")
    try:
        yield role
    finally:
        role.hba.write_text(role.hba.read_text().replace(line, ""))
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute("SELECT pg_reload_conf()")
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role.name)))


def readyz(base_url: str) -> httpx.Response:
    return httpx.get(base_url + "/readyz", timeout=5)


def test_a_wrong_password_backs_off_is_named_and_a_fixed_one_is_taken(
    role: PasswordRole, tmp_path: Path
) -> None:
    env = {"PGPASSWORD": SECRET, "METASTORE_LOG_FORMAT": "text"}
    with (
        running("api", role.url, tmp_path, env=env) as api,
        running("projector", role.url, tmp_path, env=env) as projector,
    ):
        reason = (
            f'database refused the login: password authentication failed for user "{role.name}"'
        )
        time.sleep(1.5)  # (at start, each pool, the listener and the wait try once at once)
        before, started = role.refusals(), time.monotonic()
        while time.monotonic() - started < 4:  # probed as often as a kubelet never would
            for process in (api, projector):
                answer = readyz(process.base_url)
                assert answer.status_code == 503, answer.text
                assert answer.json() == {"status": "unavailable", "reason": reason}
            time.sleep(0.2)
        # Each process tries again after about 1, 2, 4, 8 s: at most two attempts in these
        # 4 s (before, about 9 each).
        refused = role.refusals() - before
        assert 1 <= refused <= 4, refused
        for process in (api, projector):
            assert SECRET not in process.output()
            assert "; next attempt in " in process.output()

        role.set_password(SECRET)  # the password the processes have is now the right one
        deadline = time.monotonic() + 20
        while any(readyz(p.base_url).status_code != 200 for p in (api, projector)):
            assert time.monotonic() < deadline, (api.output()[-2000:], projector.output()[-2000:])
            time.sleep(0.2)
        assert "the database accepted the login" in api.output()


REFUSED = psycopg.OperationalError(
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  '
    'password authentication failed for user "metastore_api"'
)


def test_attempts_of_one_round_count_once_and_a_cancelled_one_keeps_nobody_out() -> None:
    """Pools opening together are refused together: that is one refusal (the next wait is
    the first step's, not 2^n s); an attempt cancelled after the wait (a probe's time was
    up) leaves the next one free to try, so a fixed password is still found."""
    gate = LoginGate(first_wait=0.05, longest_wait=1.0, jitter=0.0)
    rounds = [gate.admit() for _ in range(4)]  # four pools open at once
    for round_ in rounds:
        gate.failed(REFUSED, round_)
    assert gate.unavailable_reason() == (
        'database refused the login: password authentication failed for user "metastore_api"'
    )
    with pytest.raises(LoginRefused, match=r"next attempt in 0 s"):
        gate.admit()  # held back: no login is tried
    time.sleep(0.06)  # one step (0.05 s), not 2^3 of them
    cancelled = gate.admit()
    with pytest.raises(LoginRefused):
        gate.admit()  # one attempt at a time
    gate.failed(asyncio.CancelledError(), cancelled)
    gate.admit()  # free again: the server gets asked
    gate.accepted()
    assert gate.unavailable_reason() == "database unreachable"
