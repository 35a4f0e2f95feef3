"""The reads issue 35 found slow or large, end to end, with their answer sizes.

One store holds them all, at the sizes the issue reported (bench/hard_cases.py): a dataset
with 2,001 names (a 120 KB symlinks facet), one 300 KB event of 3,000 fields, 20,000
Trino queries each a job of its own reporting the same 20-field column lineage, and
31,000 generated workload events (bench/datagen.py, 1,000 nodes). The log is loaded with
COPY, folded by `metastore replay`, analysed, and each read is timed (the median of 5
after one warm-up, one request at a time) with the size of its answer.

    python -m bench.run --only bounded                  # the figures against their targets
    python -m bench.scenario bounded --other BEFORE     # this checkout's and BEFORE's code

`run(..., code=DIR)` runs migrate, replay and the API from another checkout, so the same
store and reads measure the code before a change (the store is built by this checkout's
generators; the log's format is the same): the bounded scenario (bench/scenarios/bounded.py).
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import psycopg

from bench import datagen, hard_cases, loadgen
from bench.context import Context
from bench.harness import (
    ROOT,
    WARM_WAL_SEGMENTS,
    Cluster,
    copy_records,
    metastore,
    python_env,
    run_child,
)
from bench.report import Row, below, now

GROUP = "bounded"
TARGET_MS = 100
REPEATS = 5


@dataclass(frozen=True)
class Store:
    names: int
    name_runs: int
    fields: int
    queries: int
    events: int
    nodes: int
    wal_segments: int  # recycled before measuring (bench.harness.warm_wal)


# Each size of the full store and of --quick's, side by side (as bench/sizes.py).
_STORES = {
    "names": (2_000, 200),
    "name_runs": (200, 10),
    "fields": (3_000, 300),
    "queries": (20_000, 200),
    "events": (31_000, 2_000),
    "nodes": (1_000, 200),
    "wal_segments": (WARM_WAL_SEGMENTS, 2),
}
FULL = Store(**{field: full for field, (full, _) in _STORES.items()})
QUICK = Store(**{field: quick for field, (_, quick) in _STORES.items()})


def events(store: Store, seed: int) -> Iterator[bytes]:
    yield from datagen.events(store.nodes, store.events, seed)
    for case in (
        hard_cases.many_names(store.names, store.name_runs),
        hard_cases.wide(store.fields),
        hard_cases.trino(store.queries),
    ):
        for event in case:
            yield msgspec.json.encode(event)


@dataclass(frozen=True)
class Read:
    figure: str
    path: str  # with {names}, {wide}, {trino}, {source}, {deep}, {end}, {middle}
    target: bool  # one of the cases: under TARGET_MS


def now_and_as_of(figure: str, path: str, moment: str) -> list[Read]:
    """A read of one of the issue's cases, then the same as of `moment` ("as-of <figure>")."""
    joiner = "&" if "?" in path else "?"
    return [
        Read(figure, path, True),
        Read(f"as-of {figure}", f"{path}{joiner}as_of={moment}", True),
    ]


def reads() -> list[Read]:
    """The reads, by figure (the sizes: Store, FULL or QUICK, in each row's note)."""
    many, wide, trino = "many-name dataset", "wide event", "Trino queries"
    lineage = "/datasets/{%s}/column-lineage"
    deep = "depth 10, generated events"
    return [
        *now_and_as_of(
            f"column lineage, {many}", lineage % "names" + "?direction=downstream&depth=1", "{end}"
        ),
        Read(f"dataset runs, {many}", "/datasets/{names}/runs", True),
        Read(f"dataset page, {many}", "/datasets/{names}", False),
        *now_and_as_of(
            f"column lineage {deep}", lineage % "deep" + "?direction=both&depth=10", "{generated}"
        ),
        *now_and_as_of(f"column lineage, {wide}", lineage % "wide", "{end}"),
        Read(f"column lineage, {trino}", lineage % "trino", True),
        Read(f"as-of column lineage (end), {trino}", lineage % "trino" + "?as_of={end}", True),
        Read(
            f"as-of column lineage (middle), {trino}", lineage % "trino" + "?as_of={middle}", True
        ),
        Read(f"dataset page, {trino}' table", "/datasets/{trino}", False),
        Read(f"dataset runs, {trino}' source", "/datasets/{source}/runs", False),
        Read(f"lineage depth 3, {trino}' source", "/lineage?node=dataset:{source}&depth=3", False),
    ]


def sizes(store: Store) -> str:
    return (
        f"a dataset of {store.names + 1:,} names ({store.name_runs} runs), a "
        f"{store.fields:,}-field event, {store.queries:,} Trino queries, "
        f"{store.events:,} generated events over {store.nodes:,} nodes"
    )


def rows(ctx: Context) -> list[Row]:
    cmd = ctx.command(GROUP)
    return [
        Row(
            f"{read.figure}, ms",
            "ms",
            target=f"< {TARGET_MS}" if read.target else "-",
            check=below(TARGET_MS) if read.target else None,
            command=cmd,
            client=loadgen.ASYNCIO_CLIENT,
        )
        for read in reads()
    ]


ID_OF = "SELECT dataset_id FROM readmodel.dataset_names WHERE namespace = %s AND name = %s"
# The datasets of the last layer with column lineage: the deepest walks of the workload.
DEEP = """
SELECT DISTINCT n.dataset_id FROM readmodel.column_lineage c
JOIN readmodel.dataset_names n ON n.namespace = c.out_namespace AND n.name = c.out_name
WHERE c.out_name LIKE '%%t11\\_%%' ORDER BY 1
"""


def _places(url: str, store: Store, seed: int) -> dict[str, str]:
    names = {
        "names": hard_cases.MANY_NAMES,
        "wide": hard_cases.WIDE,
        "trino": hard_cases.TRINO_TARGET,
        "source": hard_cases.TRINO_SOURCE,
    }
    places = {}
    with psycopg.connect(url) as conn:
        for key, name in names.items():
            found = conn.execute(ID_OF, name).fetchone()
            assert found is not None, name
            places[key] = str(found[0])
        deep = [str(r[0]) for r in conn.execute(DEEP)]
    # the Trino queries start two hours in, one every 2 seconds
    middle = hard_cases.START + dt.timedelta(seconds=7200 + store.queries)
    generated = datagen.START_TIME + (hard_cases.START - datagen.START_TIME) / 4
    return {
        **places,
        "deep": random.Random(seed).choice(deep),
        "end": urllib.parse.quote("2030-01-01T00:00:00Z"),
        "middle": urllib.parse.quote(middle.isoformat()),
        "generated": urllib.parse.quote(generated.isoformat()),
    }


@dataclass
class Measured:
    figure: str
    ms: float
    max_ms: float
    bytes: int
    status: int
    edges: int | None


def build(cluster: Cluster, store: Store, seed: int, code: Path, log_dir: Path) -> str:
    """The store in the cluster's first database, migrated and folded by `code`."""
    url = cluster.url
    env = python_env(url, {"METASTORE_LOG_LEVEL": "warning"})
    run_child(["-m", "metastore", "migrate"], env, log_dir / "migrate.log", cwd=code)
    copy_records(url, (datagen.to_record(b) for b in events(store, seed)))
    run_child(["-m", "metastore", "replay"], env, log_dir / "replay.log", cwd=code)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")  # as autovacuum would have, after the replay's swap
    return url


def measure_reads(url: str, store: Store, seed: int, code: Path, log_dir: Path) -> list[Measured]:
    places = _places(url, store, seed)
    out = []
    # A timeout past anything the code before the change took (it had none).
    with metastore("api", url, log_dir, {"METASTORE_READ_TIMEOUT": "600"}, cwd=code) as api:
        session = loadgen.Session(api.base_url)
        try:
            for read in reads():
                path = "/api/v1" + read.path.format(**places)
                session.get(path)  # warm-up
                timed = [session.get(path) for _ in range(REPEATS)]
                status, body = timed[-1][1], timed[-1][2]
                answer = msgspec.json.decode(body) if status == 200 else {}
                edges = len(answer["edges"]) if "edges" in answer else None
                out.append(
                    Measured(
                        read.figure,
                        statistics.median(t[0] for t in timed),
                        max(t[0] for t in timed),
                        len(body),
                        status,
                        edges,
                    )
                )
        finally:
            session.close()
    return out


def run(store: Store, seed: int, code: Path, log_dir: Path) -> list[Measured]:
    cluster = Cluster(GROUP, wal_segments=store.wal_segments)
    try:
        url = build(cluster, store, seed, code, log_dir)
        return measure_reads(url, store, seed, code, log_dir)
    finally:
        cluster.destroy()


def measure(ctx: Context, out: list[Row]) -> None:
    store = QUICK if ctx.quick else FULL
    ctx.say(f"bounded: {store.events:,} events and the cases; COPY, replay, reads")
    started = time.monotonic()
    found = run(store, ctx.seed, ROOT, ctx.log_dir)
    for row, m in zip(out, found, strict=True):
        row.value = m.ms
        edges = f", {m.edges:,} edges" if m.edges is not None else ""
        row.note = (
            f"median of {REPEATS} (max {m.max_ms:.1f} ms) after a warm-up, one at a time; "
            f"HTTP {m.status}, answer {m.bytes:,} bytes{edges}; store: {sizes(store)}"
        )
        row.measured_at = now()
    ctx.say(f"bounded: done in {time.monotonic() - started:.0f} s")
