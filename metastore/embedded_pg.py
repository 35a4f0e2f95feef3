"""An embedded PostgreSQL for `metastore dev` and the test suite.

Uses the PostgreSQL server binaries already on the machine (`pg_ctl` on PATH or under
`/usr/lib/postgresql/*/bin`). PostgreSQL refuses to run as root, so when we are root the
server runs as an unprivileged OS user (`postgres` if it exists, else `nobody`; override
with METASTORE_PG_OS_USER) and its data directory is handed to that user.

The server listens on 127.0.0.1 only, on a free port picked at each start, with no Unix
socket, and trusts local connections: it is for one laptop or one test run, not a
deployment.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

import psycopg

DB_NAME = "metastore"
DB_USER = "metastore"


class EmbeddedPostgresError(RuntimeError):
    pass


def find_bindir() -> Path:
    """The directory holding initdb and pg_ctl, newest major version first."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
        reverse=True,
    )
    if not candidates:
        raise EmbeddedPostgresError(
            "no PostgreSQL server binaries found (pg_ctl on PATH or under "
            "/usr/lib/postgresql/*/bin); install PostgreSQL (Debian: apt-get install "
            "postgresql) or set METASTORE_DATABASE_URL"
        )
    return Path(candidates[0]).parent


def _server_user() -> pwd.struct_passwd | None:
    """The OS user to run the server as, or None to run as ourselves."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("METASTORE_PG_OS_USER", "")
    for candidate in [name] if name else ["postgres", "nobody"]:
        try:
            return pwd.getpwnam(candidate)
        except KeyError:
            continue
    raise EmbeddedPostgresError(
        "running as root, and no unprivileged user to run PostgreSQL as "
        "(tried postgres, nobody); set METASTORE_PG_OS_USER"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedPostgres:
    """A PostgreSQL server whose cluster lives in `data_dir` (kept across restarts)."""

    def __init__(self, data_dir: Path, *, fast_unsafe: bool = False) -> None:
        self.data_dir = data_dir.resolve()
        self.pgdata = self.data_dir / "pgdata"
        self.logfile = self.data_dir / "postgresql.log"
        # fsync off is for throwaway test clusters only: a crash of the machine (not of
        # PostgreSQL) could lose their data, which a test run does not care about.
        self.fast_unsafe = fast_unsafe
        self.bindir = find_bindir()
        self.user = _server_user()
        self.port: int | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise EmbeddedPostgresError("server not started")
        return f"postgresql://{DB_USER}@127.0.0.1:{self.port}/{DB_NAME}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C.UTF-8"
        return subprocess.run(  # type: ignore[call-overload]
            [str(self.bindir / args[0]), *args[1:]],
            check=check,
            capture_output=True,
            text=True,
            env=env,
            cwd="/",
            **kwargs,
        )

    def _prepare_dirs(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.user is None:
            return
        # The server's user must reach the data dir: check every parent, say which one
        # blocks it (root's home usually does) rather than failing inside initdb.
        for parent in reversed(self.data_dir.parents):
            st = parent.stat()
            if not (st.st_mode & 0o001) and st.st_uid != self.user.pw_uid:
                raise EmbeddedPostgresError(
                    f"PostgreSQL runs as {self.user.pw_name!r} (we are root) but cannot "
                    f"enter {parent}; use a --data-dir outside it, e.g. /var/tmp/metastore"
                )
        os.chown(self.data_dir, self.user.pw_uid, self.user.pw_gid)
        for path in self.data_dir.rglob("*"):
            os.lchown(path, self.user.pw_uid, self.user.pw_gid)

    def start(self, timeout: float = 60.0) -> str:
        """Initializes the cluster if needed, starts it, creates the database; returns its URL."""
        self._prepare_dirs()
        if not (self.pgdata / "PG_VERSION").exists():
            result = self._run(
                "initdb",
                "-D",
                str(self.pgdata),
                "-U",
                DB_USER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                check=False,
            )
            if result.returncode != 0:
                raise EmbeddedPostgresError(f"initdb failed: {result.stderr.strip()}")
        self.port = free_port()
        result = self._pg_ctl_start(timeout)
        if result.returncode != 0:
            tail = self.logfile.read_text(errors="replace")[-2000:] if self.logfile.exists() else ""
            raise EmbeddedPostgresError(
                f"PostgreSQL did not start: {result.stdout.strip()} {result.stderr.strip()}\n{tail}"
            )
        self._create_database()
        return self.url

    def _create_database(self) -> None:
        admin = f"postgresql://{DB_USER}@127.0.0.1:{self.port}/postgres"
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
                    exists = conn.execute(
                        "SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)
                    ).fetchone()
                    if not exists:
                        conn.execute(f"CREATE DATABASE {DB_NAME}")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self, mode: str = "fast") -> None:
        """Stops the server (idempotent)."""
        if (self.pgdata / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-w", "-m", mode, "-D", str(self.pgdata), check=False)

    def restart_stopped(self, timeout: float = 60.0) -> None:
        """Starts a stopped server again on the same port (for outage tests)."""
        if self.port is None:
            raise EmbeddedPostgresError("server never started")
        result = self._pg_ctl_start(timeout)
        if result.returncode != 0:
            raise EmbeddedPostgresError(f"PostgreSQL did not restart: {result.stderr.strip()}")

    def _pg_ctl_start(self, timeout: float) -> subprocess.CompletedProcess[str]:
        options = [
            f"-p {self.port}",
            "-c listen_addresses=127.0.0.1",
            "-c unix_socket_directories=''",
            "-c max_connections=300",
            "-c shared_buffers=256MB",
        ]
        if self.fast_unsafe:
            options += ["-c fsync=off", "-c full_page_writes=off"]
        return self._run(
            "pg_ctl",
            "start",
            "-w",
            "-t",
            str(int(timeout)),
            "-D",
            str(self.pgdata),
            "-l",
            str(self.logfile),
            "-o",
            " ".join(options),
            check=False,
        )

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.data_dir, ignore_errors=True)
