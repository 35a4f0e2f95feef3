"""The fold of the inputs that stalled, starved or crashed the projector (issue 34).

    python -m bench.scenario hostile-fold [--only CASE,...] [--timeout 180]

Each case gets a fresh database on a throwaway PostgreSQL, its events appended to the log
as ingest stores them (`parse_event`, `append_events`), then one child process folds the
log (`catch_up`, what the projector does, once; batches of `limit` events) until it is done
or `--timeout` passes. Printed per case: the child's time and peak RSS (VmHWM from /proc),
the events each projection still has to fold, its dead letters, and the lines the child
logged about folding event by event (and how many of them carried a traceback).
`catalog-replay` runs the real processes instead: a projector on map B, then
`metastore replay` on map A, then five events; how long until every projection has
folded them (or the timeout). The cases are bench/hostile.py's;
tests/reliability/test_hostile_fold.py checks their outcomes. Formerly
scripts/hostile_fold.py.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

from bench import hostile
from bench.harness import ROOT, cluster, memory_kib, spawn
from bench.scenario import parser
from metastore.embedded_pg import free_port
from metastore.envelope import EnvelopeError, parse_event
from metastore.eventlog import LogRecord, append_events

FOLD = """
import logging, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
from projections.runner import catch_up
started = time.perf_counter()
count = catch_up(sys.argv[1], limit=int(sys.argv[2]))
print("FOLDED", count, time.perf_counter() - started)
"""
LAG = """
SELECT p.name, (SELECT count(*) FROM event_log e WHERE (e.tx, e.seq) > (p.cursor_tx, p.cursor_seq)),
       (SELECT count(*) FROM dead_letters d WHERE d.projection = p.name)
FROM projection_state p ORDER BY p.name
"""
FALLBACK_LINES = ("fold failed", "folding projection by projection", "isolating")


class Case:
    def __init__(self, name: str, events: Callable[[], list[dict[str, Any]]], limit: int) -> None:
        self.name, self.events, self.limit = name, events, limit


CASES = [
    Case("parent-chain-1501-one-batch", lambda: hostile.parent_chain(1501), 2000),
    Case("parent-chain-10000", lambda: hostile.parent_chain(10_000), 2000),
    Case("parent-chain-10000-spread", lambda: hostile.parent_chain(10_000), 10),
    Case("parent-cycle-10000", lambda: hostile.parent_chain(10_000, cycle=True), 2000),
    Case("merge-chain-10000", lambda: hostile.merge_chain(10_000), 2000),
    Case("column-lineage-10x4MB", lambda: hostile.wide_lineage(10, 55_000), 2000),
    Case("column-lineage-32MB", lambda: hostile.wide_lineage(1, 350_000), 2000),
    # facets just under decode.EAGER_LINEAGE_BYTES: worked out as the events are read
    Case("column-lineage-600x63KB", lambda: hostile.wide_lineage(600, 700), 2000),
    Case("schema-32MB", lambda: hostile.wide_schema(800_000), 2000),
    Case("schema-3x28MB", lambda: hostile.wide_schema(650_000, 3), 2000),
    Case("column-lineage-3x32MB", lambda: hostile.wide_lineage(3, 350_000, "wider"), 2000),
    Case("outputs-32MB", lambda: hostile.many_outputs(800_000), 2000),
    Case("outputs-40x10000", lambda: hostile.many_outputs(10_000, 40), 2000),
    Case("long-keys", hostile.long_keys, 2000),
    Case("runid-reused-2000", lambda: hostile.reused_run_ids(1000), 2000),
]


def records(events: list[dict[str, Any]], refused: list[str] | None = None) -> Iterator[Any]:
    """The events' log records; one that ingest refuses (noted in `refused`) is stored as
    it was before ingest refused it."""
    for event in events:
        text = json.dumps(event).encode()
        try:
            yield parse_event(text)
        except EnvelopeError as exc:
            if refused is None:
                raise
            refused.append(f"{exc.status} {exc.pointer}: {exc.detail}")
            yield LogRecord(
                event_time=dt.datetime.fromisoformat(event["eventTime"]),
                kind="run",
                event_type=event.get("eventType"),
                run_id=uuid.UUID(event["run"]["runId"]),
                job_namespace=event["job"]["namespace"],
                job_name=event["job"]["name"],
                producer=hostile.PRODUCER,
                digest=hashlib.sha256(text).digest(),
                event_json=text,
            )


def fold_child(url: str, limit: int, timeout: float, log: Path) -> tuple[str, float, int]:
    """Runs `catch_up` in a child: (outcome, seconds, peak RSS KiB)."""
    started = time.monotonic()
    child = spawn(["-c", FOLD, url, str(limit)], os.environ, log)
    peak = 0
    while child.poll() is None:
        peak = max(peak, memory_kib(child.pid).get("VmHWM", 0))
        if time.monotonic() - started > timeout:
            child.kill()
            child.wait()
            return f"timed out after {timeout:.0f} s", time.monotonic() - started, peak
        time.sleep(0.05)
    seconds = time.monotonic() - started
    if child.returncode:
        return f"exit {child.returncode}", seconds, peak
    return "done", seconds, peak


def measure(case: Case, url: str, timeout: float, log_dir: Path) -> None:
    events = case.events()
    size = sum(len(json.dumps(e)) for e in events)
    refused: list[str] = []
    with psycopg.connect(url) as conn:
        for start in range(0, len(events), 500):
            with conn.transaction():
                append_events(conn, list(records(events[start : start + 500], refused)))
    del events
    if refused:
        print(f"{case.name}: ingest refuses {len(refused)}: {refused[0][:200]}", flush=True)
    log = log_dir / f"{case.name}.log"
    outcome, seconds, peak = fold_child(url, case.limit, timeout, log)
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(LAG).fetchall()
        count = conn.execute("SELECT count(*) FROM event_log").fetchone()
    text = log.read_text(errors="replace")
    fallbacks = sum(1 for line in text.splitlines() if any(k in line for k in FALLBACK_LINES))
    tracebacks = text.count("Traceback")
    behind = {name: lag for name, lag, _ in rows if lag}
    letters = {name: n for name, _, n in rows if n}
    print(
        f"{case.name}: {count[0] if count else 0:,} events ({size / 1e6:.1f} MB), batches of "
        f"{case.limit}: {outcome} in {seconds:.1f} s, peak RSS {peak / 1024:.0f} MiB; "
        f"behind {behind or 0}; dead letters {letters or 0}; fallback lines {fallbacks}, "
        f"tracebacks {tracebacks}",
        flush=True,
    )


# --- catalog-replay: the real processes ---------------------------------------------------

MAP = """\
catalogs:
  - engine: "trino://t:8080"
    catalog: {catalog}
    metastore: "thrift://hms:9083"
"""


def catalog_replay(url: str, timeout: float, log_dir: Path) -> None:
    maps = {}
    for side, catalog in (("A", "lakehouse"), ("B", "warehouse")):
        maps[side] = log_dir / f"map-{side}.yaml"
        maps[side].write_text(MAP.format(catalog=catalog))
    base = {**os.environ, "METASTORE_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    port = free_port()
    env = {
        **base,
        "METASTORE_CATALOGS_FILE": str(maps["B"]),
        "METASTORE_PROJECTOR_PORT": str(port),
        "METASTORE_HOST": "127.0.0.1",
    }

    def event(i: int) -> dict[str, Any]:
        ref = {"namespace": "trino://t:8080", "name": f"lakehouse.s.t{i}"}
        return hostile.run_event(hostile.run_id("catalog", i), "catalog", outputs=[ref])

    with psycopg.connect(url) as conn, conn.transaction():
        append_events(conn, list(records([event(i) for i in range(5)])))
    projector = spawn(["-m", "metastore", "projector"], env, log_dir / "catalog-projector.log")
    try:
        if not wait_folded(url, 60):
            print("catalog-replay: the projector did not fold the first events", flush=True)
            return
        replay = subprocess.run(
            [sys.executable, "-m", "metastore", "replay"],
            env={**base, "METASTORE_CATALOGS_FILE": str(maps["A"])},
            capture_output=True,
            text=True,
            timeout=300,
        )
        said = (replay.stdout + replay.stderr).strip().splitlines()
        with psycopg.connect(url) as conn, conn.transaction():
            append_events(conn, list(records([event(i) for i in range(5, 10)])))
        started = time.monotonic()
        caught_up = wait_folded(url, timeout)
        seconds = time.monotonic() - started
        with psycopg.connect(url, autocommit=True) as conn:
            behind = {n: lag for n, lag, _ in conn.execute(LAG).fetchall() if lag}
            rules = conn.execute(
                "SELECT rules FROM projection_state WHERE name = 'datasets'"
            ).fetchone()
        derived = {fingerprint(path): side for side, path in maps.items()}.get(
            rules[0] if rules else "", "?"
        )
        print(
            f"catalog-replay: replay on map A exited {replay.returncode} saying "
            f"{said[-1] if said else ''!r} ({len(said)} lines); five events later every "
            f"projection {'caught up' if caught_up else 'still behind'} after {seconds:.1f} s "
            f"(behind {behind or 0}); datasets derived with map {derived}",
            flush=True,
        )
    finally:
        projector.terminate()
        projector.wait(30)


def fingerprint(path: Path) -> str:
    from metastore.catalogs import load_catalog_map

    return load_catalog_map(str(path)).fingerprint


def wait_folded(url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if not any(lag for _, lag, _ in conn.execute(LAG).fetchall()):
                return True
            time.sleep(0.1)
    return False


def main(argv: list[str]) -> int:
    cli = parser("hostile-fold", __doc__, other=False)
    names = [c.name for c in CASES] + ["catalog-replay"]
    cli.add_argument("--only", default=",".join(names), help=", ".join(names))
    cli.add_argument("--timeout", type=float, default=180.0, help="seconds a fold may take")
    args = cli.parse_args(argv)
    only = args.only.split(",")
    log_dir = Path(tempfile.mkdtemp(prefix="hostile-fold-"))
    print(f"logs in {log_dir}; git {git_head()}", flush=True)
    with cluster("hostile-fold", warm=False) as pg:
        template = pg.database()
        for i, name in enumerate(n for n in names if n in only):
            url = pg.copy(template, f"case_{i}")
            if name == "catalog-replay":
                catalog_replay(url, min(args.timeout, 90.0), log_dir)
            else:
                case = next(c for c in CASES if c.name == name)
                measure(case, url, args.timeout, log_dir)
            pg.drop(url)
    return 0


def git_head() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip()
