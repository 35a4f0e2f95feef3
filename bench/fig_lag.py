"""Projection lag: how long after its 2xx an event is visible in every read model.

An open-loop client posts events at a fixed rate (1,000 events/s for 60 s) to `metastore
api` while `metastore projector` runs. A watcher polls projection_state every 10 ms and
records when the slowest projection's cursor passed each position; after the run each
acknowledged event is mapped to its log position (by digest), and its lag is the first
time the cursors were at or past it minus the time its 2xx arrived.
"""

from __future__ import annotations

import asyncio
import math
import time
from bisect import bisect_left
from pathlib import Path
from typing import Any, NamedTuple

import psycopg

from bench import datagen, loadgen
from bench.context import Context
from bench.harness import cluster, metastore
from bench.report import Row, below, now

PATH = "/ingest/openlineage"
GROUP = "lag"
POLL_S = 0.01

CURSORS = "SELECT cursor_tx::text::bigint, cursor_seq FROM projection_state WHERE name = ANY(%s)"
POSITIONS = "SELECT digest, tx::text::bigint, seq FROM event_log"


ROW = Row(
    "projection lag p99, s",
    "s",
    target="< 1",
    check=below(1.0),
    client=f"{loadgen.ASYNCIO_CLIENT}, open loop",
)


def rows(ctx: Context) -> list[Row]:
    return ctx.rows(GROUP, ROW)


def _projection_names() -> list[str]:
    from projections.schema import PROJECTIONS

    return [p.NAME for p in PROJECTIONS]


async def _watch(
    url: str, names: list[str], stop: asyncio.Event, seen: list[tuple[float, tuple[int, int]]]
) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            cur = await conn.execute(CURSORS, (names,))
            found = await cur.fetchall()
            if len(found) == len(names):
                low = min((r[0], r[1]) for r in found)
                if not seen or low != seen[-1][1]:
                    seen.append((time.perf_counter(), low))
            await asyncio.sleep(POLL_S)


class LagRun(NamedTuple):
    """What a lag run saw: each request, its event's log position by digest, and when the
    slowest projection's cursor passed each position (perf_counter seconds)."""

    timed: list[loadgen.Timed]
    digests: list[bytes]
    position: dict[bytes, tuple[int, int]]
    seen: list[tuple[float, tuple[int, int]]]
    started: float  # perf_counter at the first request


def run(
    url: str, bodies: list[bytes], rate: int, seconds: float, log_dir: Path, say: Any = print
) -> LagRun:
    """Posts `bodies` open loop at `rate`/s for `seconds` to an api on `url` while a
    projector folds them, and waits (up to 60 s) for the cursors to pass the last one."""
    digests = [datagen.to_record(b).digest for b in bodies]
    names = _projection_names()
    seen: list[tuple[float, tuple[int, int]]] = []
    with metastore("api", url, log_dir) as api, metastore("projector", url, log_dir):
        say(f"lag: {rate}/s for {seconds:g} s")

        async def main() -> tuple[list[loadgen.Timed], float]:
            stop = asyncio.Event()
            watcher = asyncio.ensure_future(_watch(url, names, stop, seen))
            started = time.perf_counter()
            timed = await loadgen.open_loop(api.base_url, PATH, bodies.__getitem__, rate, seconds)
            with psycopg.connect(url) as conn:
                last = max(((r[1], r[2]) for r in conn.execute(POSITIONS)), default=(0, 0))
            deadline = time.perf_counter() + 60
            while (not seen or seen[-1][1] < last) and time.perf_counter() < deadline:
                await asyncio.sleep(0.05)
            stop.set()
            await watcher
            return timed, started

        timed, started = _run(main)
    with psycopg.connect(url) as conn:
        position = {bytes(r[0]): (r[1], r[2]) for r in conn.execute(POSITIONS)}
    return LagRun(timed, digests, position, seen, started)


def measure(ctx: Context, out: list[Row]) -> None:
    (row,) = out
    s = ctx.sizes
    total = int(s.lag_rate * s.lag_seconds)
    bodies = list(datagen.events(s.graph_nodes, total, ctx.seed + 3))
    with cluster("lag", ctx.sizes.wal_segments) as pg:
        found = run(pg.database(), bodies, s.lag_rate, s.lag_seconds, ctx.log_dir, ctx.say)
    timed = found.timed
    acked_lags, missing = lags_of(found)
    lags = [lag for _, lag in acked_lags]
    acked = [t for t in timed if not math.isnan(t.acked)]
    achieved = len(acked) / (max(t.acked for t in acked) - timed[0].sent) if acked else 0.0
    late = [t.acked - t.sent for t in acked]
    row.value = loadgen.percentile(lags, 99) if lags else None
    row.measured_at = now()
    row.note = (
        f"{total:,} events offered at {s.lag_rate:,}/s (open loop), {len(acked):,} "
        f"acknowledged ({achieved:,.0f}/s achieved, ingest p99 "
        f"{loadgen.percentile(late, 99) * 1000:.0f} ms); lag p50 "
        f"{loadgen.percentile(lags, 50):.3f} s, max {max(lags, default=float('nan')):.3f} s; "
        f"{missing} acknowledged events never became visible within 60 s. The watcher polls "
        f"every {POLL_S * 1000:.0f} ms, which bounds the resolution."
    )
    ctx.say(f"lag: p99 {row.value}")


def lags_of(found: LagRun) -> tuple[list[tuple[float, float]], int]:
    """(when its 2xx arrived, its lag) of each acknowledged event that became visible, and
    how many never did."""
    times = [t for t, _ in found.seen]
    cursors = [c for _, c in found.seen]  # non-decreasing
    lags: list[tuple[float, float]] = []
    missing = 0
    for t in found.timed:
        if math.isnan(t.acked):
            continue
        pos = found.position.get(found.digests[t.index])
        k = bisect_left(cursors, pos) if pos is not None else len(cursors)
        if k == len(cursors):
            missing += 1
            continue
        lags.append((t.acked, max(0.0, times[k] - t.acked)))
    return lags, missing


def _run(main: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(main())
    except ImportError:
        return asyncio.run(main())
