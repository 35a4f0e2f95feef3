"""Single-event ingest (events/s, p50, p99) and the API's RSS under that load.

64 connections post a 3 KB Spark event (each request a distinct event) for 20 s against
`metastore api`; the baseline is the bare Starlette route (bench/bare_app.py) under the
same load, same uvicorn settings, in the same run. Both are driven by wrk where it is
installed (`make bench-tools`): the Python client spends about half a core on the bare
route, so with it the route is bound by its client and the ratio looks better than it is
(docs/PERFORMANCE.md, "The single-event ceiling"). The `client` column says which one ran.
"""

from __future__ import annotations

import psycopg

from bench import datagen, loadgen
from bench.context import Context, RssSampler
from bench.harness import Service, bare_app, cluster, metastore
from bench.report import Row, at_least, below, now

PATH = "/ingest/openlineage"
GROUP = "ingest"


def rows(ctx: Context) -> list[Row]:
    cmd = ctx.command(GROUP)
    bare = "bare Starlette route"
    return [
        Row(
            "single-event ingest, events/s",
            "events/s",
            baseline_label=bare,
            target=">= 5,000",
            check=at_least(5_000),
            command=cmd,
        ),
        Row("single-event ingest p50, ms", "ms", baseline_label=bare, command=cmd),
        Row(
            "single-event ingest p99, ms",
            "ms",
            baseline_label=bare,
            target="< 50",
            check=below(50),
            command=cmd,
        ),
        Row("API RSS under load, MiB", "MiB", command=cmd),
    ]


def _drive(ctx: Context, service: Service, salt: int) -> loadgen.LoadResult:
    head, tail = datagen.spark_event_template()
    s = ctx.sizes
    if ctx.sizes.warmup_seconds:
        _load(service, head, tail, s.ingest_connections, s.warmup_seconds, salt + 1)
    return _load(service, head, tail, s.ingest_connections, s.ingest_seconds, salt)


def _load(
    service: Service, head: bytes, tail: bytes, connections: int, seconds: float, salt: int
) -> loadgen.LoadResult:
    if loadgen.have_wrk():
        return loadgen.wrk_post(service.base_url, PATH, head, tail, connections, seconds, salt)
    base = salt << 40
    return loadgen.closed_loop(
        service.base_url,
        PATH,
        lambda i: datagen.body_with_id(head, tail, base + i),
        connections,
        seconds=seconds,
    )


def measure(ctx: Context, out: list[Row]) -> None:
    rate, p50, p99, rss = out
    s = ctx.sizes
    with cluster("ingest", ctx.sizes.wal_segments) as pg:
        url = pg.database()
        ctx.say(f"ingest: bare route, {s.ingest_connections} connections, {s.ingest_seconds} s")
        with bare_app(ctx.log_dir) as bare:
            base = _drive(ctx, bare, salt=2)
        ctx.say(f"ingest: bare {base.rate:,.0f}/s; now metastore api")
        with metastore("api", url, ctx.log_dir) as api, RssSampler(api.pid) as sampler:
            result = _drive(ctx, api, salt=4)
            hwm = api.memory_kib().get("VmHWM", 0) / 1024
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(*) FROM event_log").fetchone()
        stored = row[0] if row else 0
    ctx.say(f"ingest: api {result.rate:,.0f}/s p99 {result.p99_ms:.1f} ms")
    when = now()
    rate.value, rate.baseline = result.rate, base.rate
    p50.value, p50.baseline = result.p50_ms, base.p50_ms
    p99.value, p99.baseline = result.p99_ms, base.p99_ms
    rss.value = sampler.peak_mib
    client = result.tool if result.tool == base.tool else f"{result.tool}; baseline: {base.tool}"
    if result.tool != loadgen.WRK:
        client += " (wrk not installed: the bare route is bound by this client)"
    rate.client = p50.client = p99.client = client
    cpu = (
        f"the client ({result.tool}) used {result.client_cpu_s / result.seconds:.0%} of "
        f"one core against the api and {base.client_cpu_s / base.seconds:.0%} against the "
        "bare route"
    )
    rate.note = (
        f"{s.ingest_connections} connections, closed loop, {s.ingest_seconds:g} s after a "
        f"{s.warmup_seconds:g} s warm-up, a {_template_size()} B Spark COMPLETE event with a "
        f"fresh runId per request; {result.requests:,} answered 2xx, {result.errors:,} "
        f"errors; {stored:,} events in the log after the run (warm-up included); {cpu}. "
        "PostgreSQL with fsync on."
    )
    p50.note = p99.note = "latency from the same run, as the load generator measures it."
    rss.note = (
        f"peak VmRSS of the `metastore api` process sampled every 0.25 s during the "
        f"single-event run (VmHWM at the end {hwm:.1f} MiB)."
    )
    for r in out:
        r.measured_at = when


def _template_size() -> int:
    head, tail = datagen.spark_event_template()
    return len(head) + 12 + len(tail)
