"""Helpers for tests that run the real processes: `metastore api` / `projector` as children."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from metastore.embedded_pg import free_port

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = ROOT.parent / "shared" / "conformance"


def conformance_files(folder: str) -> list[Path]:
    """The event files of a conformance folder, in emission order."""
    return sorted((CONFORMANCE / folder).glob("*.json"))


def conformance_events(folder: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_bytes()) for p in conformance_files(folder)]


def all_scenario_events() -> list[dict[str, Any]]:
    events = []
    for scenario in sorted(p.name for p in (CONFORMANCE / "scenarios").iterdir()):
        events += conformance_events(f"scenarios/{scenario}")
    return events


class Process:
    """A `metastore <command>` child process."""

    def __init__(self, popen: subprocess.Popen[bytes], base_url: str, log_path: Path) -> None:
        self.popen = popen
        self.base_url = base_url
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        self.popen.wait(timeout=30)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def start_process(
    command: str,
    database_url: str,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    wait_path: str | None = "/healthz",
    timeout: float = 30.0,
    verify: ssl.SSLContext | None = None,
) -> Process:
    """`verify`: the process serves HTTPS, and this context trusts its certificate."""
    port = port or free_port()
    full_env = {
        **os.environ,
        "METASTORE_DATABASE_URL": database_url,
        "METASTORE_HOST": "127.0.0.1",
        "METASTORE_PORT": str(port),
        "METASTORE_PROJECTOR_PORT": str(port),
        "METASTORE_AUTH": "disabled",
        "METASTORE_LOG_LEVEL": "info",
        **(env or {}),
    }
    log_path = log_dir / f"{command}-{port}.log"
    with log_path.open("wb") as log_file:
        popen = subprocess.Popen(
            [sys.executable, "-m", "metastore", command],
            env=full_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    scheme = "https" if verify is not None else "http"
    process = Process(popen, f"{scheme}://127.0.0.1:{port}", log_path)
    if wait_path is not None:
        deadline = time.monotonic() + timeout
        while True:
            if popen.poll() is not None:
                raise RuntimeError(f"metastore {command} exited:\n{process.output()}")
            try:
                answer = httpx.get(process.base_url + wait_path, timeout=1, verify=verify or True)
                if answer.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                process.stop()
                raise RuntimeError(f"metastore {command} did not start:\n{process.output()}")
            time.sleep(0.05)
    return process


@contextmanager
def running(command: str, database_url: str, log_dir: Path, **kwargs: Any) -> Iterator[Process]:
    process = start_process(command, database_url, log_dir, **kwargs)
    try:
        yield process
    finally:
        process.stop()


@contextmanager
def open_service(
    pg_server: Any, template_db: str, log_dir: Path, prefix: str
) -> Iterator[tuple[Process, httpx.Client]]:
    """A fresh migrated database with `metastore api` and `metastore projector` on it (no
    tokens), and a client of the API."""
    env = {"METASTORE_AUTH": "disabled"}
    with (
        pg_server.database(prefix, template_db) as url,
        running("api", url, log_dir, env=env) as api,
        running("projector", url, log_dir, env=env),
        httpx.Client(base_url=api.base_url, timeout=30) as client,
    ):
        yield api, client


README_SQL = re.compile(r"<!-- roles\.sql[^>]*-->\n```sql\n(.*?)```", re.S)


class ReadmeInstall:
    """The README's roles and database, under names of this test's own."""

    def __init__(self, pg_server: Any) -> None:
        self.pg_server = pg_server
        self.owner = f"ms{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.api = f"{self.owner}_api"
        self.projector = f"{self.owner}_projector"
        self.database = self.owner

    def statements(self, leave_out: str | None = None) -> list[str]:
        """The README's SQL block with our names, one statement (or `\\connect`) each."""
        match = README_SQL.search((ROOT / "README.md").read_text())
        assert match, "README.md has no <!-- roles.sql --> block"
        text = match.group(1)
        text = re.sub(r"\bmetastore_api\b", self.api, text)
        text = re.sub(r"\bmetastore_projector\b", self.projector, text)
        text = re.sub(r"\bmetastore\b", self.owner, text)
        statements: list[str] = []
        current: list[str] = []
        for line in text.splitlines():
            if line.startswith("--") or not line.strip():
                continue
            if line.startswith("\\connect "):
                statements.append(line.strip())
                continue
            current.append(line.strip())
            if line.rstrip().endswith(";"):
                statements.append(" ".join(current).rstrip(";"))
                current = []
        assert not current, f"a statement without its semicolon: {current}"
        return [s for s in statements if not (leave_out and s.startswith(leave_out))]

    def run_sql(self, leave_out: str | None = None) -> None:
        """As the test server's superuser, in `psql`'s manner (`\\connect` switches)."""
        conn = psycopg.connect(self.pg_server.url("postgres"), autocommit=True)
        try:
            for statement in self.statements(leave_out):
                if statement.startswith("\\connect "):
                    conn.close()
                    conn = psycopg.connect(
                        self.pg_server.url(statement.split()[1]), autocommit=True
                    )
                else:
                    conn.execute(statement)
        finally:
            conn.close()

    def url(self, role: str) -> str:
        netloc = f"{role}@{self.pg_server.host}:{self.pg_server.port}"
        return self.pg_server.parts._replace(netloc=netloc, path="/" + self.database).geturl()

    def migrate(self) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "METASTORE_DATABASE_URL": self.url(self.owner),
            "METASTORE_API_ROLE": self.api,
            "METASTORE_PROJECTOR_ROLE": self.projector,
            "METASTORE_LOG_FORMAT": "text",
        }
        return subprocess.run(
            [sys.executable, "-m", "metastore", "migrate"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )

    def drop(self) -> None:
        with psycopg.connect(self.pg_server.url("postgres"), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.database)
                )
            )
            for role in (self.api, self.projector, self.owner):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
