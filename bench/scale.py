"""`make bench-scale`: a platform's year of lineage (bench/scale_corpus.py), measured as it grows.

    python -m bench.run --scale                       # 1,000,000, 2,500,000, 5,000,000 events
    python -m bench.run --scale --max-events 250000   # the same steps scaled: 50k, 125k, 250k
    python -m bench.run --scale --sizes 250000,1000000

One PostgreSQL, one `metastore api`, one corpus streamed into it through
`POST /ingest/openlineage/batch`; at each size, the events since the last size are folded
(`catch_up` in a child, against reading and decoding them alone), then storage is taken
per table, the queries are timed against the whole log, and `metastore replay` rebuilds
everything. Each size's figures are against their same-run baselines, and the queries'
p95 also against their value at the first size. Results go to a JSON file beside the
report (docs/scale/results.json), the report (docs/BENCHMARKS-SCALE.md) and its pictures
(docs/scale/*.png) are rendered from it (bench/scale_report.py), after every size.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg

from bench import (
    fig_column_lineage,
    fig_fold,
    fig_lineage,
    fig_reads,
    fig_replay,
    fig_search,
    loadgen,
    scale_corpus,
    scale_report,
    scale_storage,
)
from bench.context import Context, RssSampler
from bench.harness import WORK_DIR, Cluster, Service, copy_records, metastore
from bench.report import Row, load_average, machine, now
from bench.scale_results import Figure, Point, Results
from bench.sizes import FULL, QUICK
from metastore.eventlog import LogRecord

DEFAULT_SIZES = (1_000_000, 2_500_000, 5_000_000)
PATH = "/ingest/openlineage/batch"
BATCH = 100  # events a request
CONNECTIONS = 4
COPY_SAMPLE = 50_000  # events of each step COPYed again for the ingest baseline
# Events of each step read and decoded again for the fold's baseline: the corpus's mix is
# the same throughout a step, and reading a whole 2,500,000-event step again costs 8 minutes.
READ_SAMPLE = 250_000
# What a run takes on disk at its peak, per event of the largest size: the log (2.7 KB),
# the read models (3.5 KB) twice while `metastore replay` builds new ones beside the live
# ones, WAL and the ingest baseline's scratch copy (measured at 250,000 events after issue
# 39's phase 2; docs/BENCHMARKS-SCALE.md), with a tenth spare. The events' JSON is about
# 9 KB an event, half of it Spark's logical plans, which the log compresses about ten times.
DISK_BYTES_PER_EVENT = 11_000
DISK_HEADROOM = 0.85  # of the free space: the machine is shared


def sizes_for(max_events: int | None, sizes: str | None) -> list[int]:
    """The sizes to measure at: given, or the default steps scaled to `max_events`."""
    if sizes:
        return sorted({int(s.replace("_", "")) for s in sizes.split(",") if s.strip()})
    top = max_events or DEFAULT_SIZES[-1]
    return sorted({max(1, top * s // DEFAULT_SIZES[-1]) for s in DEFAULT_SIZES})


def fitting(free_bytes: int) -> int:
    """The largest size (in steps of 250,000 events) whose run fits `free_bytes`."""
    return int(free_bytes * DISK_HEADROOM / DISK_BYTES_PER_EVENT) // 250_000 * 250_000


def plan_sizes(
    max_events: int | None, sizes: str | None, where: Path = WORK_DIR
) -> tuple[list[int], str]:
    """The sizes, and what the disk says of them. The default steps shrink to what fits the
    free disk (said in the report); sizes asked for that do not fit are refused."""
    free = shutil.disk_usage(where).free
    planned = sizes_for(max_events, sizes)
    need = planned[-1] * DISK_BYTES_PER_EVENT
    text = (
        f"{planned[-1]:,} events need about {need / 2**30:,.0f} GiB at the peak "
        f"({DISK_BYTES_PER_EVENT:,} bytes an event: the log, the read models twice during "
        f"the replay, WAL); {free / 2**30:,.0f} GiB free in {where}"
    )
    if need <= free * DISK_HEADROOM:
        return planned, text
    fits = fitting(free)
    if max_events or sizes or fits < DEFAULT_SIZES[0]:
        raise SystemExit(
            f"bench-scale: not enough disk: {text}; up to about {fits:,} events fit "
            "(--max-events; METASTORE_BENCH_DIR moves the data)"
        )
    return sizes_for(fits, None), f"{text}: the default steps were scaled to {fits:,} events"


# --------------------------------------------------------------------------- ingest


class Ingested(msgspec.Struct):
    events: int
    json_bytes: int
    seconds: float
    requests: int
    retries: int  # 503s (the API's byte budget) retried
    client_cpu_s: float
    api_peak_mib: float


def load(api: Service, stream: Iterator[bytes], count: int) -> Ingested:
    """POSTs the next `count` events of `stream` in batches of BATCH from CONNECTIONS
    connections, closed loop; every batch must be stored whole (a 503 is retried)."""
    host, port = loadgen._host_port(api.base_url)
    remaining = count
    totals = {"events": 0, "bytes": 0, "requests": 0, "retries": 0}

    def next_body() -> bytes | None:
        nonlocal remaining
        if remaining <= 0:
            return None
        events = list(itertools.islice(stream, min(BATCH, remaining)))
        remaining -= BATCH
        if not events:
            return None
        totals["events"] += len(events)
        totals["bytes"] += sum(map(len, events))
        return b"[" + b",".join(events) + b"]"

    async def worker() -> None:
        conn = loadgen.HttpConnection(host, port)
        try:
            while (body := next_body()) is not None:
                while True:
                    status, payload = await conn.request("POST", PATH, body)
                    if status == 503:
                        totals["retries"] += 1
                        await asyncio.sleep(0.2)
                        continue
                    answer = msgspec.json.decode(payload) if payload else None
                    if (
                        status != 200
                        or not isinstance(answer, dict)
                        or answer.get("status") != ("success")
                    ):
                        raise RuntimeError(f"ingest answered {status}: {payload[:500]!r}")
                    totals["requests"] += 1
                    break
        finally:
            await conn.close()

    async def main() -> None:
        await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))

    cpu0, t0 = time.process_time(), time.perf_counter()
    with RssSampler(api.pid) as sampler:
        loadgen._run(main)
    return Ingested(
        totals["events"],
        totals["bytes"],
        time.perf_counter() - t0,
        totals["requests"],
        totals["retries"],
        time.process_time() - cpu0,
        sampler.peak_mib,
    )


SAMPLE = """
SELECT event_time, kind, event_type, run_id, job_namespace, job_name, producer, digest,
       event::text
FROM event_log WHERE seq > (SELECT max(seq) FROM event_log) - %s ORDER BY seq
"""


def copy_baseline(cluster: Cluster, url: str, events: int) -> tuple[int, float]:
    """COPYs the last `events` events of the log again, into a fresh database of the same
    server, in chunks read beforehand: (events, seconds of COPY)."""
    scratch = cluster.database()
    copied, seconds = 0, 0.0
    try:
        with psycopg.connect(url) as conn, conn.cursor("sample") as cur:
            cur.execute(SAMPLE, (events,))
            while chunk := cur.fetchmany(5_000):
                records = [
                    LogRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8].encode())
                    for r in chunk
                ]
                done = copy_records(scratch, records)
                copied, seconds = copied + done.events, seconds + done.seconds
    finally:
        name = scratch.rsplit("/", 1)[1]
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name}")
    return copied, seconds


# ----------------------------------------------------------------------------- queries

BARE_EDGES = """
DROP TABLE IF EXISTS bench_edges;
CREATE TABLE bench_edges AS
SELECT DISTINCT
    CASE WHEN e.direction = 'input' THEN n.dataset_id ELSE e.job_id END AS src,
    CASE WHEN e.direction = 'input' THEN e.job_id ELSE n.dataset_id END AS dst
FROM readmodel.job_edges e
JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name;
CREATE INDEX bench_edges_src ON bench_edges (src);
CREATE INDEX bench_edges_dst ON bench_edges (dst);
ANALYZE bench_edges;
"""
# Start nodes: jobs and datasets with lineage, in a random-like order fixed by the seed.
# (NOT EXISTS: `NOT IN (subquery)` is checked row by row once the jobs' ids no longer fit
# work_mem, which at 2,500,000 events took longer than the rest of the run.)
STARTS = """
SELECT kind, id FROM (
    SELECT DISTINCT 'dataset' AS kind, src AS id FROM bench_edges e WHERE NOT EXISTS (
        SELECT 1 FROM readmodel.jobs j WHERE j.id = e.src)
    UNION SELECT DISTINCT 'job', job_id FROM readmodel.job_edges
) s ORDER BY hashtext(id::text || %(seed)s), id LIMIT %(n)s
"""


def time_queries(
    ctx: Context, url: str, api: Service, middle: Any, figures: list[Figure], read_queries: int
) -> None:
    """Lineage (now, as of `middle`), column lineage (both), lists, lookup, search."""
    lineage = fig_lineage.rows(ctx)
    ctx.say("scale: lineage queries")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(BARE_EDGES)
        starts = conn.execute(STARTS, {"seed": str(ctx.seed), "n": ctx.sizes.lineage_queries})
        picked = [(kind, id_) for kind, id_ in starts]
        edges = conn.execute("SELECT count(*) FROM bench_edges").fetchone()
    population = (
        f"drawn at random (seed) from the jobs and datasets with lineage "
        f"({edges[0] if edges else 0:,} job-dataset edges)"
    )
    fig_lineage.measure_starts(
        ctx,
        lineage,
        url,
        api,
        [f"{kind}:{id_}" for kind, id_ in picked],
        [id_ for _, id_ in picked],
        "uuid",
        middle,
        population,
    )
    column = fig_column_lineage.rows(ctx)
    ctx.say("scale: column lineage queries")
    fig_column_lineage.measure(ctx, column, url, middle, api)
    reads = fig_reads.rows(ctx)
    ctx.say("scale: list, lookup and search queries")
    fig_reads.measure(
        ctx,
        reads,
        url,
        api,
        job_namespaces=("spark-prod", "airflow-prod", "prod-lineage", "dbt"),
        dataset_namespaces=(scale_corpus.LAKEHOUSE, scale_corpus.TRINO_PROD, "s3a://landing"),
    )
    search = fig_search.rows(ctx.command("scale"))
    fig_search.measure(ctx, search, url, api, read_queries)
    figures += [_figure(r) for r in [*lineage, *column, *reads, *search]]


def _figure(row: Row) -> Figure:
    return Figure(row.figure, row.unit, row.value, row.baseline, row.baseline_label, row.note)


# ------------------------------------------------------------------------------ a step

COUNTS = """
SELECT (SELECT count(*) FROM readmodel.jobs),
       (SELECT count(*) FROM readmodel.runs),
       (SELECT count(*) FROM readmodel.datasets WHERE merged_into IS NULL),
       (SELECT count(*) FROM readmodel.dataset_names),
       (SELECT count(*) FROM readmodel.runs WHERE state IN ('FAIL', 'ABORT')),
       (SELECT count(*) FROM dead_letters)
"""
EVENTS_JSON = """
SELECT count(*), coalesce(sum(size_bytes), 0), count(*) FILTER (WHERE size_bytes > 40000),
       coalesce(sum(size_bytes) FILTER (WHERE size_bytes > 40000), 0)
FROM event_log
"""
CURSOR = """
SELECT cursor_tx::text::bigint, cursor_seq FROM projection_state ORDER BY 1, 2 LIMIT 1
"""


def measure_step(
    ctx: Context,
    cluster: Cluster,
    url: str,
    api: Service,
    corpus: scale_corpus.Corpus,
    stream: Iterator[bytes],
    size: int,
    done: int,
    extra: dict[str, str],
    replay: bool = True,
) -> Point:
    seconds: dict[str, float] = {}
    figures: list[Figure] = []
    step = size - done

    t0 = time.perf_counter()
    ctx.say(f"scale {size:,}: ingest {step:,} events through {PATH}")
    ingested = load(api, stream, step)
    seconds["generate and ingest"] = time.perf_counter() - t0
    copied, copy_seconds = copy_baseline(cluster, url, min(COPY_SAMPLE, ingested.events))
    figures.append(
        Figure(
            "batch ingest, events/s",
            "events/s",
            ingested.events / ingested.seconds,
            copied / copy_seconds if copy_seconds else None,
            f"raw COPY of the last {copied:,} of them",
            f"{ingested.events:,} events ({ingested.json_bytes / 2**20:,.0f} MiB of JSON) in "
            f"{ingested.requests:,} batches of {BATCH} from {CONNECTIONS} connections, closed "
            f"loop, generated on the fly by the client ({ingested.client_cpu_s:.0f} s of its "
            f"CPU over {ingested.seconds:.0f} s, on the same 2 cores); {ingested.retries} "
            f"batches retried after a 503; API peak RSS {ingested.api_peak_mib:.0f} MiB. "
            "Baseline: COPY of the last events of the step (read back from the log) into a "
            "fresh database on the same server, in chunks of 5,000.",
        )
    )

    with psycopg.connect(url) as conn:
        row = conn.execute(CURSOR).fetchone()
    after = (int(row[0]), int(row[1])) if row else (0, 0)
    ctx.say(f"scale {size:,}: fold the {step:,} new events, then read them again")
    folded, fold_s, fold_peak = fig_fold.catch_up(url, ctx.log_dir / f"fold-{size}.log", extra)
    read, read_s = fig_fold.read_only(
        url, ctx.log_dir / f"read-{size}.log", after, extra, READ_SAMPLE
    )
    seconds["fold"] = fold_s
    figures.append(
        Figure(
            "projector fold rate, events/s",
            "events/s",
            folded / fold_s,
            read / read_s,
            "reading and decoding the same events only, no folds",
            f"the {folded:,} events of this step folded into the read models of the step "
            f"before by `projections.runner.catch_up` in a child in {fold_s:.1f} s; reading "
            f"and decoding the first {read:,} of them alone took {read_s:.1f} s.",
        )
    )
    figures.append(
        Figure("projector fold peak RSS, MiB", "MiB", fold_peak / 1024, None, "-", "VmHWM.")
    )

    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        scale_storage.analyze(conn)
        tables = scale_storage.table_sizes(conn)
        row = conn.execute(COUNTS).fetchone()
        events_json = conn.execute(EVENTS_JSON).fetchone()
    assert row is not None and events_json is not None
    counts = dict(
        zip(
            ("jobs", "runs", "datasets", "dataset names", "failed runs", "dead letters"),
            row,
            strict=True,
        )
    )
    seconds["storage"] = time.perf_counter() - t0
    total = sum(t.total for t in tables)
    events, json_bytes = int(events_json[0]), int(events_json[1])
    large, large_bytes = int(events_json[2]), int(events_json[3])
    read_models = sum(t.total for t in tables if t.table.startswith("readmodel."))
    figures.append(
        Figure(
            "storage all-in, bytes/event",
            "bytes/event",
            total / events,
            json_bytes / events,
            "the events' JSON size",
            "the log (event_log's partitions and event_digests) and every read-model table, "
            "each with TOAST and indexes (pg_total_relation_size after VACUUM ANALYZE); the "
            f"split is in the storage table below. {large:,} events are over 40 KB (Spark "
            f"events with a logical plan), {large_bytes / 2**20:,.0f} MiB of the "
            f"{json_bytes / 2**20:,.0f} MiB of JSON, and compress well: against the JSON of "
            f"the other {events - large:,} events the store is "
            f"{total / max(1, json_bytes - large_bytes):.2f}x, the read models alone "
            f"{read_models / max(1, json_bytes - large_bytes):.2f}x.",
        )
    )

    t0 = time.perf_counter()
    middle = scale_corpus.START + (corpus.clock - scale_corpus.START) / 2
    time_queries(ctx, url, api, middle, figures, ctx.sizes.read_queries)
    seconds["queries"] = time.perf_counter() - t0

    if replay:
        figures += _replay_figures(ctx, url, size, events, extra, folded / fold_s, seconds)
    return Point(
        events,
        json_bytes,
        figures,
        tables,
        {k: int(v) for k, v in counts.items()},
        seconds,
        load_average(),
        now(),
    )


def _replay_figures(
    ctx: Context,
    url: str,
    size: int,
    events: int,
    extra: dict[str, str],
    fold_rate: float,
    seconds: dict[str, float],
) -> list[Figure]:
    """`metastore replay` of the whole log: its rate and peak memory (its time in `seconds`)."""
    ctx.say(f"scale {size:,}: replay")
    replayed, replay_s, peak_kib, samples = fig_replay.replay(
        url, ctx.log_dir / f"replay-{size}.log", events, extra
    )
    seconds["replay"] = replay_s
    quarter = [hwm for t, hwm in samples if t <= replay_s / 4]
    return [
        Figure(
            "replay, events/s",
            "events/s",
            replayed / replay_s,
            fold_rate,
            "fold rate above",
            f"`metastore replay --no-progress` (a child, the whole command including the "
            f"swap) replayed {replayed:,} events in {replay_s:.1f} s.",
        ),
        Figure(
            "replay peak RSS, MiB",
            "MiB",
            peak_kib / 1024,
            max(quarter) / 1024 if quarter else None,
            "peak after the first quarter",
            "VmHWM of the replay process sampled every 0.1 s.",
        ),
    ]


# -------------------------------------------------------------------------------- main


def run(
    sizes: list[int],
    seed: int,
    out: Path,
    log_dir: Path,
    command: str,
    keep: bool = False,
    disk: str = "",
    replay_every: bool = False,
) -> Results:
    """Measures at each of `sizes`; the replay (the longest step: it reads the whole log)
    only at the first and the largest, unless `replay_every`."""
    ctx = context(sizes[-1], seed, log_dir)
    m = machine()
    results = Results(
        command,
        f"{m.nproc} CPUs ({m.cpu_model}), {m.memory_gib:.1f} GiB, Linux {m.kernel}, "
        f"Python {m.python}",
        now(),
        seed,
        sizes,
        notes=[f"Disk: {disk}.", f"Load average before: {load_average()}."],
    )
    ctx.say(f"scale run at {', '.join(f'{s:,}' for s in sizes)} events; {disk}")
    extra = catalog_env(log_dir)
    corpus = scale_corpus.Corpus(seed)
    stream = corpus.events(sizes[-1])
    pg = Cluster("scale", warm=sizes[-1] >= 100_000)
    try:
        url = pg.database()
        with metastore("api", url, log_dir, extra) as api:
            done = 0
            for size in sizes:
                replay = replay_every or size in (sizes[0], sizes[-1])
                point = measure_step(ctx, pg, url, api, corpus, stream, size, done, extra, replay)
                done = size
                results.points.append(point)
                results.corpus = dict(corpus.counts)
                if size == sizes[-1]:
                    ctx.say("scale: column sizes at the largest size")
                    with psycopg.connect(url, autocommit=True) as conn:
                        sizes_now = scale_storage.table_sizes(conn)
                        for table in scale_storage.readmodel_tables(sizes_now):
                            results.columns[table] = scale_storage.column_sizes(conn, table)
                        results.indexes = scale_storage.index_sizes(conn)
                results.finished = now()
                write(results, out)
                ctx.say(f"scale {size:,}: written to {out}")
    finally:
        if keep:
            ctx.say(f"scale: the store is left running: {pg.url} (data in {pg.dir})")
        else:
            pg.destroy()
    return results


def context(largest: int, seed: int, log_dir: Path) -> Context:
    """The run's context for a log of `largest` events (bench.scale_requery's too)."""
    return Context(
        sizes=dataclasses.replace(
            QUICK if largest < 100_000 else FULL,
            name="scale",
            lineage_queries=queries_for(largest, 200),
            read_queries=queries_for(largest, 300),
        ),
        log_dir=log_dir,
        seed=seed,
        quick=False,
    )


def catalog_env(log_dir: Path) -> dict[str, str]:
    """The corpus's catalog map, written to `log_dir`, as the processes' environment."""
    catalogs = log_dir / "catalogs.yaml"
    catalogs.write_text(scale_corpus.catalogs_yaml())
    return {"METASTORE_CATALOGS_FILE": str(catalogs)}


def queries_for(events: int, full: int) -> int:
    """Requests per query figure: `full` from 100,000 events, fewer for tiny runs (tests)."""
    return full if events >= 100_000 else 20 if events >= 10_000 else 10


def write(results: Results, out: Path) -> None:
    """results.json beside the pictures, the report, the pictures."""
    pictures = out.parent / "scale"
    pictures.mkdir(parents=True, exist_ok=True)
    (pictures / "results.json").write_bytes(msgspec.json.format(msgspec.json.encode(results)))
    names = scale_report.plot(results, pictures)
    out.write_text(scale_report.render(results, [pictures / n for n in names], out.parent))
