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


# Each size of the full run and of --quick, side by side.
_RUNS: dict[str, tuple[int | float, int | float]] = {
    "ingest_connections": (64, 16),
    "ingest_seconds": (20.0, 1.0),
    "batch_events": (200_000, 2_000),
    "batch_size": (100, 100),
    "batch_connections": (8, 4),
    "fold_events": (200_000, 2_000),
    "lag_rate": (1_000, 100),
    "lag_seconds": (60.0, 2.0),
    "log_events": (1_000_000, 5_000),
    "graph_nodes": (100_000, 1_000),
    "lineage_depth": (5, 5),
    "lineage_queries": (200, 20),
    "read_queries": (300, 20),
    "warmup_seconds": (2.0, 0.2),
    "chain_runs": (10_000, 300),
    # 1 GB (bench.harness.WARM_WAL); quick: the same steps over 32 MB (the full run's 1 GB
    # took 13 s a group)
    "wal_segments": (64, 2),
}
FULL = Sizes("full", **{field: full for field, (full, _) in _RUNS.items()})  # type: ignore[arg-type]
QUICK = Sizes("quick", **{field: quick for field, (_, quick) in _RUNS.items()})  # type: ignore[arg-type]

SEED = 20_241_017
