"""`metastore dev` supervises its children, and every command names the variable of a port in
use, against the real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from metastore.embedded_pg import free_port

PROMETHEUS_PORT = 9090


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    return {**env, **extra}


@contextlib.contextmanager
def occupied(port: int | None = None) -> Iterator[int]:
    """A port something listens on (as Prometheus on 9090), for the block."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port or 0))
        sock.listen()
        yield int(sock.getsockname()[1])


class Dev:
    """A `metastore dev` child process against an existing database."""

    def __init__(self, database_url: str, log: Path, *args: str, **env: str) -> None:
        self.port = free_port()
        self.log = log
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "metastore", "dev", "--port", str(self.port), *args],
                env=clean_env(METASTORE_DATABASE_URL=database_url, **env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.popen.poll() is None, self.output()
            try:
                url = f"http://127.0.0.1:{self.port}/healthz"
                if httpx.get(url, timeout=1).status_code == 200 and len(self.children()) == 2:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.2)

    def children(self) -> dict[str, int]:
        """{"api": pid, "projector": pid}"""
        pid = self.popen.pid
        try:
            listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return {}
        found = {}
        for child in map(int, listed):
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                found[argv[-2].decode() if argv[-1] == b"" else argv[-1].decode()] = child
        return found

    def projector_port(self) -> int:
        environ = Path(f"/proc/{self.children()['projector']}/environ").read_bytes()
        for entry in environ.split(b"\0"):
            if entry.startswith(b"METASTORE_PROJECTOR_PORT="):
                return int(entry.split(b"=", 1)[1])
        raise AssertionError("the projector has no METASTORE_PROJECTOR_PORT")

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            raise


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("victim", ["projector", "api"])
def test_dev_exits_non_zero_when_a_child_dies_and_stops_the_other(
    database_url: str, tmp_path: Path, victim: str
) -> None:
    dev = Dev(database_url, tmp_path / "dev.log")
    try:
        dev.wait_ready()
        children = dev.children()
        os.kill(children[victim], signal.SIGKILL)
        status = dev.popen.wait(timeout=60)
    finally:
        dev.stop()
    assert status == 1, dev.output()
    assert f"metastore {victim} exited (signal SIGKILL); stopped the others" in dev.output()
    assert not any(alive(pid) for pid in children.values())


def test_dev_exits_zero_on_sigterm(database_url: str, tmp_path: Path) -> None:
    dev = Dev(database_url, tmp_path / "dev.log")
    dev.wait_ready()
    children = dev.children()
    assert dev.stop() == 0, dev.output()
    assert not any(alive(pid) for pid in children.values())


def test_dev_runs_beside_prometheus_on_9090_and_beside_a_second_dev(
    database_url: str, tmp_path: Path
) -> None:
    # Something listens on 9090: ours, or whatever already does on this machine.
    with contextlib.ExitStack() as stack:
        with contextlib.suppress(OSError):
            stack.enter_context(occupied(PROMETHEUS_PORT))
        first = Dev(database_url, tmp_path / "first.log")
        second = Dev(database_url, tmp_path / "second.log")
        try:
            first.wait_ready()
            second.wait_ready()
            ports = {first.projector_port(), second.projector_port()}
            assert len(ports) == 2 and PROMETHEUS_PORT not in ports
            for port in ports:  # one projector folds, the other waits as standby
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
                assert health.status_code == 200
            time.sleep(2)
            assert first.popen.poll() is None, first.output()
            assert second.popen.poll() is None, second.output()
        finally:
            assert first.stop() == 0, first.output()
            assert second.stop() == 0, second.output()


def test_dev_takes_the_projector_port_it_is_given(database_url: str, tmp_path: Path) -> None:
    port = free_port()
    dev = Dev(database_url, tmp_path / "dev.log", METASTORE_PROJECTOR_PORT=str(port))
    try:
        dev.wait_ready()
        assert dev.projector_port() == port
        # the projector listens a moment after the api answers (a loaded machine: seconds)
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, dev.output()
                time.sleep(0.2)
        assert answer.status_code == 200
    finally:
        assert dev.stop() == 0, dev.output()


def one_line_naming(result: subprocess.CompletedProcess[str], variable: str, port: int) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{variable}={port}" in lines[0] and "already in use" in lines[0]
    return lines[0]


def metastore(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metastore", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.parametrize(
    ("command", "variable"),
    [("api", "METASTORE_PORT"), ("projector", "METASTORE_PROJECTOR_PORT")],
)
def test_a_port_in_use_is_one_line_naming_its_variable(
    database_url: str, command: str, variable: str
) -> None:
    with occupied() as port:
        env = clean_env(
            METASTORE_DATABASE_URL=database_url,
            METASTORE_AUTH="disabled",
            METASTORE_HOST="127.0.0.1",
            **{variable: str(port)},
        )
        one_line_naming(metastore(command, env=env), variable, port)


@pytest.mark.parametrize("variable", ["--port", "METASTORE_PORT", "METASTORE_PROJECTOR_PORT"])
def test_dev_names_the_variable_of_a_port_in_use_before_it_starts_anything(
    tmp_path: Path, variable: str
) -> None:
    data_dir = tmp_path / "never-created"
    with occupied() as port:
        args = ["dev", "--data-dir", str(data_dir)]
        env = clean_env()
        if variable == "--port":
            args += ["--port", str(port)]
        else:
            env[variable] = str(port)
            if variable == "METASTORE_PROJECTOR_PORT":
                args += ["--port", str(free_port())]
        one_line_naming(metastore(*args, env=env), variable, port)
    assert not data_dir.exists()  # no PostgreSQL was started
