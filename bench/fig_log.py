"""The big log and the figures that stand on it: fold, storage, lineage, reads, replay.

One PostgreSQL, one log of 1,000,000 events over a graph of 100,000 datasets and jobs,
bulk-loaded with COPY (not through HTTP: the ingest figures measure that). The first
200,000 are folded alone for the fold rate, then the rest; the read figures run against
the whole folded log, and the replay rebuilds it all at the end.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from bench import (
    datagen,
    fig_column_lineage,
    fig_fold,
    fig_health,
    fig_lineage,
    fig_reads,
    fig_replay,
    fig_storage,
)
from bench.context import Context
from bench.harness import Missing, cluster, copy_records, have_module, metastore
from bench.report import Row

GROUP = "log"


def rows(ctx: Context) -> list[Row]:
    return [
        *fig_fold.rows(ctx),
        *fig_storage.rows(ctx),
        *fig_lineage.rows(ctx),
        *fig_lineage.impact_rows(ctx),
        *fig_column_lineage.rows(ctx),
        *fig_reads.rows(ctx),
        *fig_health.rows(ctx),
        *fig_replay.rows(ctx),
    ]


def measure(ctx: Context, out: list[Row], notes: list[str]) -> None:
    if not have_module("projections.runner"):
        raise Missing("the projector (projections.runner) has not landed")
    fold_rows, rest = out[:1], out[1:]
    storage_rows, rest = rest[:1], rest[1:]
    lineage_rows, rest = rest[:5], rest[5:]
    column_rows, rest = rest[:3], rest[3:]
    reads_rows, rest = rest[:4], rest[4:]
    health_rows, replay_rows = rest[: len(fig_health.FIGURES)], rest[len(fig_health.FIGURES) :]
    s = ctx.sizes
    graph = datagen.build_graph(s.graph_nodes, ctx.seed)
    gen = datagen.Generator(graph, ctx.seed)
    records = (datagen.to_record(b) for b in gen.events(s.log_events))
    with cluster("log", ctx.sizes.wal_segments) as pg:
        url = pg.database()
        ctx.say(f"log: COPY the first {s.fold_events:,} events")
        first = copy_records(url, itertools.islice(records, s.fold_events))
        fold_rate = fig_fold.measure(ctx, fold_rows, url, first.events)
        ctx.say(f"log: COPY the other {s.log_events - first.events:,} events")
        more = copy_records(url, records)
        folded, seconds, peak = fig_fold.catch_up(url, ctx.log_dir / "fold-rest.log")
        settled = _settle(url)
        loaded = first.events + more.events
        notes.append(
            f"The big log: {loaded:,} events ({(first.json_bytes + more.json_bytes) / 2**20:,.0f}"
            f" MiB of JSON) over {len(graph.datasets):,} datasets and {graph.n_jobs:,} jobs, "
            f"generated (seed {ctx.seed}) and bulk-loaded with COPY at "
            f"{loaded / (first.seconds + more.seconds):,.0f} events/s (generation included); "
            f"folding the remaining {folded:,} into the non-empty read models took "
            f"{seconds:.0f} s ({folded / seconds:,.0f} events/s, peak RSS {peak / 1024:.0f} MiB)."
            + (
                f" Then the read models were vacuumed as the projector does after a catch-up of"
                f" {settled[0]:,} events or more (projections/settle.py: `catch_up` is the fold"
                f" alone), in {settled[1]:.0f} s; the reads measure a settled store."
                if settled
                else ""
            )
        )
        fig_storage.measure(ctx, storage_rows, url)
        middle = datagen.START_TIME + (gen.clock - datagen.START_TIME) / 2
        with metastore("api", url, ctx.log_dir) as api:
            ctx.say("log: lineage queries")
            _guard(
                ctx,
                lineage_rows,
                lambda: fig_lineage.measure(ctx, lineage_rows, url, graph, gen, api),
            )
            ctx.say("log: column lineage queries")
            _guard(
                ctx,
                column_rows,
                lambda: fig_column_lineage.measure(ctx, column_rows, url, middle, api),
            )
            ctx.say("log: list and lookup queries")
            _guard(ctx, reads_rows, lambda: fig_reads.measure(ctx, reads_rows, url, api))
            ctx.say("log: run statistics and lateness queries")
            _guard(
                ctx,
                health_rows,
                lambda: fig_health.measure(ctx, health_rows, url, api, middle),
            )
        _guard(ctx, replay_rows, lambda: fig_replay.measure(ctx, replay_rows, url, fold_rate))


def _guard(ctx: Context, rows: list[Row], work: Callable[[], None]) -> None:
    """Runs one figure; a failure marks its rows n/a with the reason, the others go on."""
    try:
        work()
    except Exception as exc:  # the report says what failed, the run goes on
        reason = f"n/a: {type(exc).__name__}: {str(exc).strip()[:300]}"
        ctx.say(f"failed: {reason}")
        for row in rows:
            if row.value is None:
                row.note = reason


def _settle(url: str) -> tuple[int, float] | None:
    """VACUUM ANALYZE the read models as the projector's Settler does once it has caught up
    after a long fold, which `catch_up` (the fold alone) does not: (its threshold, seconds),
    or None in a tree without it."""
    if not have_module("projections.settle"):
        return None
    import time

    import psycopg

    from projections import settle

    started = time.monotonic()
    with psycopg.connect(url) as conn:
        settle.vacuum_read_models(conn)
    return settle.SETTLE_AFTER_EVENTS, time.monotonic() - started
