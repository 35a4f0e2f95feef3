"""A parent chain of 10,000 runs (run i's parent is run i+1, children first in the log),
folded in full batches and in batches of 10, against the same runs without parents.

Each fold is `projections.runner.catch_up` in a child process on a fresh database of one
PostgreSQL, the chain's and the baseline's in turns. Before the chain was cut at
MAX_PARENT_DEPTH runs (issue 34), 1,501 such runs in one batch took 15 minutes
(RecursionError, then every event alone, each moving the roots of all earlier runs), and a
chain growing upwards batch by batch moved every run below its top in every batch.
"""

from __future__ import annotations

import json
from typing import Any

from bench.context import Context
from bench.harness import cluster, copy_records, python_env, run_child
from bench.hostile import parent_chain, run_event, run_id
from bench.report import Row, below, now
from metastore.envelope import parse_event

GROUP = "chain"
CATCH_UP = (
    "import sys; from projections.runner import catch_up; "
    "print(catch_up(sys.argv[1], limit=int(sys.argv[2])))"
)
SPREAD_BATCH = 10  # events a batch in the spread fold


def rows(ctx: Context) -> list[Row]:
    n = ctx.sizes.chain_runs
    return [
        Row(
            f"parent chain of {n:,} runs, full batches, s",
            "s",
            baseline_label=f"the same {n:,} runs without parents",
            target="< 10 (in seconds)",
            check=below(10),
            command=ctx.command(GROUP),
        ),
        Row(
            f"parent chain of {n:,} runs, batches of {SPREAD_BATCH}, s",
            "s",
            baseline_label=f"the same {n:,} runs without parents, batches of {SPREAD_BATCH}",
            target="< 3 x baseline (linear)",
            command=ctx.command(GROUP),
        ),
    ]


def flat(n: int) -> list[dict[str, Any]]:
    return [run_event(run_id("flat", i), "chain") for i in range(n)]


def measure(ctx: Context, out: list[Row]) -> None:
    n = ctx.sizes.chain_runs
    with cluster("chain", ctx.sizes.wal_segments) as pg:
        for row, limit in zip(out, (2_000, SPREAD_BATCH), strict=True):
            seconds = {}
            for name, events in (("chain", parent_chain(n)), ("flat", flat(n))):
                url = pg.database()
                copy_records(url, (parse_event(json.dumps(e).encode()) for e in events))
                ctx.say(f"chain: {name}, {n:,} runs in batches of {limit}")
                log = ctx.log_dir / f"chain-{name}-{limit}.log"
                seconds[name], peak, _ = run_child(
                    ["-c", CATCH_UP, url, str(limit)], python_env(url), log
                )
                folded = int(log.read_text().strip().splitlines()[-1])
                assert folded == n, f"{name}: folded {folded} of {n}"
            row.value, row.baseline = seconds["chain"], seconds["flat"]
            row.measured_at = now()
            row.note = (
                f"{n:,} RunEvents, run i's `parent` facet naming run i+1 (children first), "
                f"folded into empty read models by `catch_up(limit={limit})` in a child process "
                f"(peak RSS {peak / 1024:.0f} MiB); the baseline folds {n:,} runs without parents "
                "the same way. Each run's root is the run 100 up (projections.runs."
                "MAX_PARENT_DEPTH) or the top."
            )
            if row.check is None and row.baseline:
                row.check = below(3 * row.baseline)
            ctx.say(f"chain: {row.value:.1f} s vs {row.baseline:.1f} s without parents")
