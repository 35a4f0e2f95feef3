"""The foundation: command line, configuration, migrations, the embedded PostgreSQL."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore.config import VARIABLES, ConfigError, load_settings
from metastore.embedded_pg import free_port
from metastore.migrations import apply_migrations, migration_ids, missing_migrations
from tests.support import ROOT, running, start_process

SUBCOMMANDS = ("dev", "migrate", "api", "projector", "replay")


def metastore(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "metastore", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_help_lists_every_subcommand_and_each_has_help() -> None:
    top = metastore("--help")
    assert top.returncode == 0
    for command in SUBCOMMANDS:
        assert re.search(rf"^\s+{command}\b", top.stdout, re.M), command
        sub = metastore(command, "--help")
        assert sub.returncode == 0, sub.stderr
        assert f"usage: metastore {command}" in sub.stdout


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("METASTORE_PORT", "eighty"),
        ("METASTORE_PORT", "70000"),
        ("METASTORE_LOG_LEVEL", "chatty"),
        ("METASTORE_LOG_FORMAT", "xml"),
        ("METASTORE_MAX_EVENT_BYTES", "-1"),
        ("METASTORE_AUTH", "maybe"),
    ],
)
def test_a_wrong_value_stops_the_process_with_one_line_naming_the_variable(
    name: str, value: str
) -> None:
    result = metastore("api", env={name: value, "METASTORE_DATABASE_URL": "postgresql://x/y"})
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert name in lines[0]


def test_settings_defaults_and_token_files(tmp_path: Path) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text("alpha\n\n beta \n")
    settings = load_settings(
        {"METASTORE_READ_TOKENS": "gamma, delta", "METASTORE_READ_TOKENS_FILE": str(token_file)}
    )
    assert settings.port == 8080 and settings.log_format == "text"
    assert settings.tokens["read"] == {"alpha", "beta", "gamma", "delta"}
    assert settings.tokens["ingest"] == frozenset()
    with pytest.raises(ConfigError, match="METASTORE_EXPORT_TOKENS_FILE"):
        load_settings({"METASTORE_EXPORT_TOKENS_FILE": str(tmp_path / "missing")})


def test_readme_documents_every_variable_in_one_table() -> None:
    readme = (ROOT / "README.md").read_text()
    documented = set(re.findall(r"^\| `(METASTORE_[A-Z_]+)` \|", readme, re.M))
    assert documented == {name for name, _, _ in VARIABLES}


def test_migrations_are_idempotent(empty_database_url: str) -> None:
    assert apply_migrations(empty_database_url) == migration_ids()
    assert apply_migrations(empty_database_url) == []
    with psycopg.connect(empty_database_url) as conn:
        assert missing_migrations(conn) == []


def test_two_migrators_at_once_apply_each_migration_once(empty_database_url: str) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            results.append(apply_migrations(empty_database_url))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(len(r) for r in results) == [0, len(migration_ids())]


def test_migrate_command_then_api_serves(empty_database_url: str, tmp_path: Path) -> None:
    result = metastore("migrate", env={"METASTORE_DATABASE_URL": empty_database_url})
    assert result.returncode == 0, result.stderr
    proc = start_process("api", empty_database_url, tmp_path)
    try:
        assert httpx.get(proc.base_url + "/healthz").status_code == 200
        assert httpx.get(proc.base_url + "/readyz").status_code == 200
    finally:
        proc.stop()


def test_reads_before_the_projector_made_the_read_models_answer_503(
    empty_database_url: str, tmp_path: Path
) -> None:
    """A fresh install's api pods may serve before the projector's first start has created
    the read-model tables: a read then is a 503 to retry, not a server error."""
    apply_migrations(empty_database_url)  # the schema, no read-model tables yet
    with running("api", empty_database_url, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api:
        answer = httpx.get(api.base_url + "/api/v1/jobs")
        assert answer.status_code == 503
        assert answer.headers["retry-after"] == "5"
        assert "the read models are not created yet" in answer.json()["detail"]
        assert httpx.get(api.base_url + "/readyz").status_code == 200  # ingest works meanwhile


@pytest.mark.parametrize("command", ["api", "projector"])
def test_api_and_projector_refuse_a_schema_that_is_behind(
    empty_database_url: str, command: str
) -> None:
    # They listen (and answer /healthz) before the database answers, so on ports of their own.
    port = str(free_port())
    env = {
        "METASTORE_DATABASE_URL": empty_database_url,
        "METASTORE_AUTH": "disabled",
        "METASTORE_HOST": "127.0.0.1",
        "METASTORE_PORT": port,
        "METASTORE_PROJECTOR_PORT": port,
    }
    result = metastore(command, env=env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"metastore: the database schema is behind this version ({len(migration_ids())} "
        f"migration(s) missing, first {migration_ids()[0]}); run `metastore migrate`"
    )


def test_api_without_database_url_says_so() -> None:
    env = {k: v for k, v in os.environ.items() if k != "METASTORE_DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "api"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert result.returncode != 0
    assert "METASTORE_DATABASE_URL" in result.stderr


def _postgres_processes(data_dir: Path) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(data_dir) in line and "postgres" in line]


def test_dev_runs_everything_and_sigterm_leaves_nothing_running(tmp_path: Path) -> None:
    data_dir = Path("/tmp") / f"metastore-dev-test-{os.getpid()}"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    env["METASTORE_PROJECTOR_PORT"] = str(free_port())
    log = (tmp_path / "dev.log").open("wb")
    dev = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "metastore",
            "dev",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert dev.poll() is None, (tmp_path / "dev.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "dev.log").read_text()
            time.sleep(0.2)
        assert (data_dir / "pgdata" / "PG_VERSION").exists()
        assert _postgres_processes(data_dir)
        assert "open to anyone" in (tmp_path / "dev.log").read_text()
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(timeout=60) == 0
        assert not _postgres_processes(data_dir)
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
    finally:
        if dev.poll() is None:
            dev.kill()
        subprocess.run(["rm", "-rf", str(data_dir)])


def test_the_wheel_ships_the_migrations_and_projection_ddl(tmp_path: Path) -> None:
    import zipfile

    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("metastore-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for mid in migration_ids():
        assert f"metastore/sql/{mid}.sql" in names
    for ddl in (ROOT / "sql" / "projections").glob("*.sql"):
        assert f"metastore/sql/projections/{ddl.name}" in names
