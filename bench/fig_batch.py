"""Batch ingest: 100-event batches from 8 connections, against raw COPY of the same events.

Both load the same generated events into the same table (event_log and event_digests, in
two fresh databases of one PostgreSQL): once through `POST /ingest/openlineage/batch`,
once with psycopg's COPY (bench/harness.copy_records), which is the floor of what
PostgreSQL can take.
"""

from __future__ import annotations

import msgspec
import psycopg

from bench import datagen, loadgen
from bench.context import Context, RssSampler
from bench.harness import cluster, copy_records, metastore
from bench.report import Row, at_least, now

PATH = "/ingest/openlineage/batch"
GROUP = "batch"


ROW = Row(
    "batch ingest, events/s",
    "events/s",
    baseline_label="raw psycopg COPY, same events, same table",
    target=">= 15,000",
    check=at_least(15_000),
    client=f"{loadgen.ASYNCIO_CLIENT}; baseline: psycopg",
)


def rows(ctx: Context) -> list[Row]:
    return ctx.rows(GROUP, ROW)


def _all_accepted(payload: bytes) -> bool:
    answer = msgspec.json.decode(payload)
    return isinstance(answer, dict) and answer.get("status") == "success"


def measure(ctx: Context, out: list[Row]) -> None:
    (row,) = out
    s = ctx.sizes
    ctx.say(f"batch: generating {s.batch_events:,} events")
    bodies = list(datagen.events(s.graph_nodes, s.batch_events, ctx.seed + 2))
    with cluster("batch", ctx.sizes.wal_segments) as pg:
        copy_url = pg.database()
        ctx.say("batch: COPY baseline")
        records = [datagen.to_record(b) for b in bodies]  # outside the timed COPY
        loaded = copy_records(copy_url, records)
        del records
        batches = [
            b"[" + b",".join(bodies[i : i + s.batch_size]) + b"]"
            for i in range(0, len(bodies), s.batch_size)
        ]
        del bodies
        http_url = pg.database()
        ctx.say(f"batch: {len(batches):,} batches over {s.batch_connections} connections")
        with metastore("api", http_url, ctx.log_dir) as api, RssSampler(api.pid) as sampler:
            result = loadgen.closed_loop(
                api.base_url,
                PATH,
                batches.__getitem__,
                s.batch_connections,
                count=len(batches),
                check=_all_accepted,
            )
        with psycopg.connect(http_url) as conn:
            counted = conn.execute("SELECT count(*) FROM event_log").fetchone()
    stored = counted[0] if counted else 0
    events_per_s = (
        stored / result.seconds
        if result.errors == 0
        else (result.requests * s.batch_size / result.seconds)
    )
    row.value = events_per_s
    row.baseline = loaded.events / loaded.seconds
    row.measured_at = now()
    row.note = (
        f"{len(batches):,} batches of {s.batch_size} events ({loaded.json_bytes / 1e6:,.0f} MB "
        f"of JSON) from {s.batch_connections} connections, closed loop; {result.requests:,} "
        f"batches answered success, {result.errors:,} not; {stored:,} events stored; batch "
        f"p50 {result.p50_ms:.0f} ms, p99 {result.p99_ms:.0f} ms; API peak RSS "
        f"{sampler.peak_mib:.0f} MiB; client CPU {result.client_cpu_s:.1f} s over "
        f"{result.seconds:.1f} s. Baseline: COPY into event_digests and event_log in "
        "transactions of 50,000 events, same server, fsync on."
    )
    ctx.say(f"batch: {events_per_s:,.0f}/s vs COPY {row.baseline:,.0f}/s")
