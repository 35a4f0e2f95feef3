"""What every benchmark stands on: a throwaway PostgreSQL, the real processes, bulk loads.

Each benchmark starts its own PostgreSQL (fsync on: the ingest figures are about durable
commits) in a temporary folder, with the migrations and the read-model tables, and runs
the real `metastore api` / `metastore projector` as child processes, as a deployment does.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench import datagen
from metastore.embedded_pg import EmbeddedPostgres, free_port
from metastore.eventlog import LogRecord
from metastore.migrations import apply_migrations

ROOT = Path(__file__).resolve().parent.parent
WORK_DIR = Path(os.environ.get("METASTORE_BENCH_DIR", "/var/tmp"))


def have_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


class Missing(Exception):
    """A piece the figure needs has not landed (or refuses); the row says n/a and why."""


def prepare_database(url: str) -> None:
    """Migrations, then the read-model tables (when the projector has landed)."""
    apply_migrations(url)
    if have_module("projections.schema"):
        from projections.schema import create_readmodel_tables

        with psycopg.connect(url) as conn:
            create_readmodel_tables(conn)


# A server that has been running reuses its WAL segment files: each checkpoint renames the
# ones behind it for reuse, keeping up to min_wal_size (or as much as recent checkpoints
# took). A fresh server has none, so every 16 MB of WAL is a new file, zero-filled by the
# backend that needs it, under the WAL write lock that every commit waits for, which
# slowed batch ingest (docs/PERFORMANCE.md, "The benchmarks' servers keep recycled WAL").
# Each benchmark's server keeps 1 GB, as deploy/helm recommends, and fills it
# before measuring, so the figures are those of a server that has been running.
WARM_WAL = "1GB"
WARM_WAL_SEGMENTS = 64  # of 16 MB


def warm_wal(url: str, segments: int = WARM_WAL_SEGMENTS) -> None:
    """Sets min_wal_size to WARM_WAL and leaves `segments` of WAL recycled, ready for reuse."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET min_wal_size = '{WARM_WAL}'")
        conn.execute("SELECT pg_reload_conf()")
        for _ in range(segments):
            conn.execute("SELECT pg_current_xact_id()")  # a commit record: a switch needs WAL
            conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")  # renames the segments behind it for reuse


class Cluster:
    """A throwaway PostgreSQL server; `database()` makes a fresh, prepared database."""

    def __init__(
        self,
        label: str,
        warm: bool = True,
        wal_segments: int = WARM_WAL_SEGMENTS,
        durable: bool = True,
    ) -> None:
        """`warm`: fill and recycle `wal_segments` of WAL first (see warm_wal; tiny runs
        skip it or recycle a few, the same steps without the full run's 1 GB). `durable`
        False (fsync off): for a scenario that times reads or folds, not commits."""
        WORK_DIR.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=f"metastore-bench-{label}-", dir=WORK_DIR))
        self.pg = EmbeddedPostgres(self.dir, fast_unsafe=not durable)
        self.url = self.pg.start()
        if warm:
            warm_wal(self.url, wal_segments)
        self._count = 0

    def database(self) -> str:
        """A new database on this server with the schema; the first one is `metastore`."""
        self._count += 1
        if self._count == 1:
            url = self.url
        else:
            name = f"bench_{self._count}"
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            url = self.url.rsplit("/", 1)[0] + "/" + name
        prepare_database(url)
        return url

    def copy(self, url: str, name: str) -> str:
        """A new database `name`, a copy of the one at `url` (whose sessions are ended:
        yoyo keeps its connection after migrating)."""
        template = url.rsplit("/", 1)[1]
        with self._admin() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (template,),
            )
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
        return self.url.rsplit("/", 1)[0] + "/" + name

    def drop(self, url: str) -> None:
        with self._admin() as conn:
            conn.execute(f"DROP DATABASE {url.rsplit('/', 1)[1]} WITH (FORCE)")

    def _admin(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", autocommit=True)

    def destroy(self) -> None:
        self.pg.destroy()


@contextlib.contextmanager
def cluster(
    label: str, wal_segments: int = WARM_WAL_SEGMENTS, warm: bool = True, durable: bool = True
) -> Iterator[Cluster]:
    c = Cluster(label, warm=warm, wal_segments=wal_segments, durable=durable)
    try:
        yield c
    finally:
        c.destroy()


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a live process, in KiB, from /proc/<pid>/status."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU time of a live process (from /proc/<pid>/stat); `children`: of its
    children it has waited for instead (cutime and cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / ticks


def server_cpu_seconds(pg: EmbeddedPostgres) -> float:
    """User + system CPU of a running server's ended children (backends, their workers),
    from its postmaster's: the server's work for connections since closed."""
    return cpu_seconds(int((pg.pgdata / "postmaster.pid").read_text().split()[0]), children=True)


def children_cpu_seconds() -> float:
    """User + system CPU of this process's ended children (getrusage)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@dataclass
class Service:
    """A child process serving HTTP on `port` (the api, the projector or the bare app)."""

    popen: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def memory_kib(self) -> dict[str, int]:
        return memory_kib(self.pid)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def service_env(
    database_url: str, port: int, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    return {
        **os.environ,
        "METASTORE_DATABASE_URL": database_url,
        "METASTORE_HOST": "127.0.0.1",
        "METASTORE_PORT": str(port),
        "METASTORE_PROJECTOR_PORT": str(port),
        "METASTORE_AUTH": "disabled",
        "METASTORE_LOG_LEVEL": "warning",
        "PYTHONPATH": str(ROOT),
        **(extra or {}),
    }


def spawn(
    argv: list[str], env: Mapping[str, str], log_path: Path, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    """`python <argv>` running `cwd`'s code (a checkout's), its output to `log_path`."""
    with log_path.open("wb") as log_file:
        return subprocess.Popen(
            [sys.executable, *argv],
            env={**env, "PYTHONPATH": str(cwd)},
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=cwd,
        )


def start_service(
    argv: list[str],
    env: Mapping[str, str],
    port: int,
    log_dir: Path,
    timeout: float = 60.0,
    cwd: Path = ROOT,
) -> Service:
    """`cwd`: the checkout whose code runs (another commit's, for a before/after)."""
    log_path = log_dir / f"{Path(argv[-1]).name}-{port}.log"
    popen = spawn(argv, env, log_path, cwd)
    service = Service(popen, port, log_path)
    deadline = time.monotonic() + timeout
    while True:
        if popen.poll() is not None:
            raise Missing(f"`{' '.join(argv)}` exited: {service.output()[-600:]}")
        try:
            if httpx.get(service.base_url + "/healthz", timeout=2).status_code == 200:
                return service
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            service.stop()
            raise Missing(f"`{' '.join(argv)}` did not answer /healthz: {service.output()}")
        time.sleep(0.1)


@contextlib.contextmanager
def metastore(
    command: str,
    database_url: str,
    log_dir: Path,
    extra: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
) -> Iterator[Service]:
    """`python -m metastore api|projector` against the database, until the block ends."""
    port = free_port()
    service = start_service(
        ["-m", "metastore", command],
        service_env(database_url, port, extra),
        port,
        log_dir,
        cwd=cwd,
    )
    try:
        yield service
    finally:
        service.stop()


@contextlib.contextmanager
def bare_app(log_dir: Path) -> Iterator[Service]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_PORT": str(port)}
    service = start_service(["-m", "bench.bare_app"], env, port, log_dir)
    try:
        yield service
    finally:
        service.stop()


COPY_DIGESTS = "COPY event_digests (digest) FROM STDIN"
COPY_EVENTS = """
COPY event_log (event_time, kind, event_type, run_id, job_namespace, job_name, producer,
                digest, size_bytes, event) FROM STDIN
"""


@dataclass
class Loaded:
    events: int
    seconds: float
    json_bytes: int


def copy_records(database_url: str, records: Iterable[LogRecord], chunk: int = 50_000) -> Loaded:
    """Bulk-loads the records with COPY (event_digests and event_log), one transaction a chunk.

    The raw-COPY baseline of batch ingest, and how the big fixture log is loaded.
    """
    events = json_bytes = 0
    started = time.perf_counter()
    with psycopg.connect(database_url) as conn:
        # The storage the API's appends use (metastore.db.tune_ingest_session), so this stays the
        # ceiling of the same work.
        try:
            conn.execute("SET default_toast_compression = 'lz4'")
        except psycopg.Error:
            conn.rollback()
        batch: list[LogRecord] = []
        for record in records:
            batch.append(record)
            if len(batch) >= chunk:
                json_bytes += _copy_chunk(conn, batch)
                events += len(batch)
                batch = []
        if batch:
            json_bytes += _copy_chunk(conn, batch)
            events += len(batch)
    return Loaded(events, time.perf_counter() - started, json_bytes)


def _copy_chunk(conn: psycopg.Connection[Any], records: list[LogRecord]) -> int:
    size = 0
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(COPY_DIGESTS) as copy:
            for r in records:
                copy.write_row((r.digest,))
        with cur.copy(COPY_EVENTS) as copy:
            for r in records:
                size += len(r.event_json)
                copy.write_row(
                    (
                        r.event_time,
                        r.kind,
                        r.event_type,
                        r.run_id,
                        r.job_namespace,
                        r.job_name,
                        r.producer,
                        r.digest,
                        len(r.event_json),
                        r.event_json.decode(),
                    )
                )
    return size


def load_workload(
    url: str, events: int, nodes: int, seed: int, fold: bool = True
) -> datagen.Generator:
    """`events` events of the benchmark workload (bench/datagen.py, over a graph of about
    `nodes` datasets and jobs) COPYed into the log, then folded by this checkout's
    projections unless `fold` is False. The generator tells the events' times."""
    generator = datagen.Generator(datagen.build_graph(nodes, seed), seed)
    copy_records(url, (datagen.to_record(body) for body in generator.events(events)))
    if fold:
        from projections.runner import catch_up

        catch_up(url)
    return generator


def run_child(
    argv: list[str],
    env: Mapping[str, str],
    log_path: Path,
    sample: float = 0.1,
    cwd: Path = ROOT,
) -> tuple[float, int, list[tuple[float, int]]]:
    """Runs a Python child to the end: (seconds, peak RSS KiB, RSS samples).

    The samples are (seconds since start, VmHWM KiB so far), to tell whether memory grows
    while the child works through the log; the peak is the last (largest) of them. Not
    wait4's ru_maxrss: Linux carries the parent's high-water mark across fork and exec into
    the child's, so a child of this (large) benchmark process would report the parent's
    size (seen: 1.4 GB for a child whose own VmHWM stayed near 100 MB).
    """
    started = time.perf_counter()
    popen = spawn(argv, env, log_path, cwd)
    samples: list[tuple[float, int]] = []
    while True:
        pid, status, usage = os.wait4(popen.pid, os.WNOHANG)
        if pid:
            break
        hwm = memory_kib(popen.pid).get("VmHWM")
        if hwm:
            samples.append((time.perf_counter() - started, hwm))
        time.sleep(sample)
    popen.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if popen.returncode != 0:
        tail = log_path.read_text(errors="replace")[-1500:]
        raise Missing(f"`{' '.join(argv)}` failed ({popen.returncode}): {tail}")
    del usage  # see the docstring: ru_maxrss is the parent's, not the child's
    peak = max((hwm for _, hwm in samples), default=0)
    return seconds, peak, samples


def python_child(code: str, args: list[str], log_path: Path, cwd: Path = ROOT) -> str:
    """Runs `python -c code args` on `cwd`'s code to the end; the last line it printed."""
    run_child(["-c", code, *args], dict(os.environ), log_path, cwd=cwd)
    return log_path.read_text(errors="replace").strip().splitlines()[-1]


def python_env(database_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return service_env(database_url, free_port(), extra)
