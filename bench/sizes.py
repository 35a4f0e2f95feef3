"""Every size the benchmarks use, in one place: the full run (`make bench`) and `--quick`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    name: str
    # single-event ingest: closed loop, `ingest_connections` connections for `ingest_seconds`
    ingest_connections: int
    ingest_seconds: float
    # batch ingest: `batch_events` events in batches of `batch_size` over `batch_connections`
    batch_events: int
    batch_size: int
    batch_connections: int
    # projector: fold the first `fold_events` events of the log into empty read models
    fold_events: int
    # projection lag: open loop at `lag_rate` events/s for `lag_seconds`
    lag_rate: int
    lag_seconds: float
    # the big log (replay, reads, storage): `log_events` events over a graph of
    # `graph_nodes` datasets and jobs
    log_events: int
    graph_nodes: int
    lineage_depth: int
    lineage_queries: int  # distinct random start nodes
    read_queries: int  # requests per list/lookup endpoint
    warmup_seconds: float
    # a parent chain of `chain_runs` runs, folded in full batches and in batches of 10
    chain_runs: int
    # WAL (16 MB segments) each group's server fills and recycles before it measures
    wal_segments: int


FULL = Sizes(
    name="full",
    ingest_connections=64,
    ingest_seconds=20.0,
    batch_events=200_000,
    batch_size=100,
    batch_connections=8,
    fold_events=200_000,
    lag_rate=1_000,
    lag_seconds=60.0,
    log_events=1_000_000,
    graph_nodes=100_000,
    lineage_depth=5,
    lineage_queries=200,
    read_queries=300,
    warmup_seconds=2.0,
    chain_runs=10_000,
    wal_segments=64,  # 1 GB (bench.harness.WARM_WAL)
)

QUICK = Sizes(
    name="quick",
    ingest_connections=16,
    ingest_seconds=1.0,
    batch_events=2_000,
    batch_size=100,
    batch_connections=4,
    fold_events=2_000,
    lag_rate=100,
    lag_seconds=2.0,
    log_events=5_000,
    graph_nodes=1_000,
    lineage_depth=5,
    lineage_queries=20,
    read_queries=20,
    warmup_seconds=0.2,
    chain_runs=300,
    wal_segments=2,  # the same steps over 32 MB: the full run's 1 GB took 13 s a group
)

SEED = 20_241_017
