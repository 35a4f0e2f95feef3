"""Authorization's cost (issue 44): single-event ingest and Cockpit's reads with a policy,
against the same api without one, in the same run.

Every api of the group runs with named tokens (METASTORE_TOKENS_FILE), so the runs differ
only in who decides: nobody (the baseline), the values' policy file (METASTORE_POLICY_FILE),
or OPA (bench/opa_server.py: the chart's Rego evaluated by regopy, as a process of its own,
METASTORE_OPA_URL). Ingest posts fig_ingest's 3 KB Spark event with a fresh runId per
request for the same time and connections, each side into a fresh database, with the
Spark team's token, which the policy lets write the event's namespaces (one decision per
request; OPA's are cached). Reads: a Cockpit mix (namespaces, jobs, datasets, runs, search),
one request at a time, as a user of a group the policy lets read those namespaces, over
a folded log of the benchmarks' workload (bench/datagen.py: `READ_EVENTS` events over
`READ_NODES` datasets and jobs in five namespaces, two of them the user's).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
from collections.abc import Iterator, Mapping
from pathlib import Path

import msgspec

from bench import datagen, loadgen
from bench.context import Context
from bench.fig_ingest import PATH
from bench.harness import Cluster, Service, cluster, copy_records, metastore, start_service
from bench.report import Row, at_least, below, now
from metastore.embedded_pg import free_port

GROUP = "authz"
INGEST_TOKEN = "bench-spark-token"
READ_TOKEN = "bench-cockpit-token"
SIDES = ("none", "policy", "opa")
READ_EVENTS, READ_NODES = 10_000, 1_000  # --quick: a tenth
LABEL = {"policy": "the values' policy file", "opa": "OPA (the chart's Rego, regopy)"}
READS = (
    "/api/v1/namespaces",
    "/api/v1/jobs?limit=50",
    "/api/v1/datasets?limit=50",
    "/api/v1/runs?limit=50",
    "/api/v1/search?q=orders",
)


def rows(ctx: Context) -> list[Row]:
    cmd = ctx.command(GROUP)
    same = "the same api without authorization"
    out = []
    for side in SIDES[1:]:
        out.append(
            Row(
                f"single-event ingest with {LABEL[side]}, events/s",
                "events/s",
                baseline_label=same,
                target=">= 0.91 x baseline (within 1.1x)",
                command=cmd,
            )
        )
        out.append(
            Row(
                f"Cockpit reads with {LABEL[side]}, median ms",
                "ms",
                baseline_label=same,
                target="<= 1.2 x baseline",
                command=cmd,
                client=loadgen.ASYNCIO_CLIENT,
            )
        )
    return out


def _namespaces() -> list[str]:
    """The namespaces fig_ingest's event writes: its job's and its outputs'."""
    head, tail = datagen.spark_event_template()
    event = msgspec.json.decode(datagen.body_with_id(head, tail, 0))
    return sorted({event["job"]["namespace"], *(o["namespace"] for o in event["outputs"])})


def _policy(namespaces: list[str]) -> dict[str, object]:
    """The Spark team may write its namespaces, its analysts read them; nine other teams
    have rules of their own, so a decision looks past some."""
    others = [
        {"subjects": [f"group:team-{i}"], "namespaces": [f"s3a://team-{i}*", f"team-{i}-*"]}
        for i in range(9)
    ]
    patterns = [n + "*" for n in namespaces]
    return {
        "admins": ["group:platform"],
        "read": [*others, {"subjects": ["group:sales"], "namespaces": patterns}],
        "sensitive": [*others, {"subjects": ["group:sales"], "namespaces": patterns}],
        "write": [*others, {"subjects": ["spark-sales"], "namespaces": patterns}],
        "export": ["lineage-export"],
    }


def _files(log_dir: Path, namespaces: list[str]) -> tuple[Path, Path]:
    tokens = log_dir / "authz-tokens.json"
    tokens.write_text(
        json.dumps(
            [
                {"name": "spark-sales", "scopes": ["ingest"], "token": INGEST_TOKEN},
                {
                    "name": "alice",
                    "scopes": ["read"],
                    "token": READ_TOKEN,
                    "groups": ["sales"],
                },
            ]
        )
    )
    policy = log_dir / "authz-policy.json"
    policy.write_text(json.dumps(_policy(namespaces)))
    return tokens, policy


@contextlib.contextmanager
def _opa(log_dir: Path, policy: Path) -> Iterator[Service]:
    port = free_port()
    argv = ["-m", "bench.opa_server", "--port", str(port), "--policy", str(policy)]
    service = start_service(argv, dict(os.environ), port, log_dir)
    try:
        yield service
    finally:
        service.stop()


def _env(side: str, tokens: Path, policy: Path, opa: Service) -> Mapping[str, str]:
    env = {"METASTORE_AUTH": "enabled", "METASTORE_TOKENS_FILE": str(tokens)}
    if side == "policy":
        env["METASTORE_POLICY_FILE"] = str(policy)
    elif side == "opa":
        env["METASTORE_OPA_URL"] = opa.base_url + "/"
    return env


def _ingest(ctx: Context, api: Service, salt: int) -> loadgen.LoadResult:
    head, tail = datagen.spark_event_template()
    s = ctx.sizes

    def load(seconds: float, salt: int) -> loadgen.LoadResult:
        if loadgen.have_wrk():
            return loadgen.wrk_post(
                api.base_url, PATH, head, tail, s.ingest_connections, seconds, salt, INGEST_TOKEN
            )
        base = salt << 40
        return loadgen.closed_loop(
            api.base_url,
            PATH,
            lambda i: datagen.body_with_id(head, tail, base + i),
            s.ingest_connections,
            seconds=seconds,
            token=INGEST_TOKEN,
        )

    if s.warmup_seconds:
        load(s.warmup_seconds, salt + 1)
    return load(s.ingest_seconds, salt)


def _reads(ctx: Context, api: Service) -> float:
    paths = [READS[i % len(READS)] for i in range(max(len(READS), ctx.sizes.read_queries))]
    loadgen.get_many(api.base_url, READS, READ_TOKEN)  # warm-up: pools, caches
    answers = loadgen.get_many(api.base_url, paths, READ_TOKEN)
    failed = [p for p, st in zip(paths, answers.statuses, strict=True) if st != 200]
    if failed:
        raise RuntimeError(f"reads answered {sorted(set(answers.statuses))}: {failed[:3]}")
    return statistics.median(answers.latencies_ms)


def _combined(results: list[loadgen.LoadResult]) -> loadgen.LoadResult:
    """The runs of one side as one: their requests over their time, the worse p99."""
    return loadgen.LoadResult(
        requests=sum(r.requests for r in results),
        errors=sum(r.errors for r in results),
        seconds=sum(r.seconds for r in results),
        p99_ms=max(r.p99_ms for r in results),
        tool=results[0].tool,
    )


def _workload(ctx: Context, pg: Cluster) -> str:
    """A database with the benchmarks' workload folded, for the reads."""
    from projections.runner import catch_up

    events = READ_EVENTS // (10 if ctx.quick else 1)
    ctx.say(f"authz: load and fold {events:,} workload events for the reads")
    url = pg.database()
    gen = datagen.Generator(
        datagen.build_graph(READ_NODES // (10 if ctx.quick else 1), ctx.seed), ctx.seed
    )
    copy_records(url, (datagen.to_record(b) for b in gen.events(events)))
    catch_up(url)
    return url


def measure(ctx: Context, out: list[Row]) -> None:
    namespaces = _namespaces()
    tokens, policy = _files(ctx.log_dir, namespaces)
    ingest: dict[str, loadgen.LoadResult] = {}
    reads: dict[str, float] = {}
    runs: dict[str, list[loadgen.LoadResult]] = {side: [] for side in SIDES}
    read_runs: dict[str, list[float]] = {side: [] for side in SIDES}
    with cluster("authz") as pg, _opa(ctx.log_dir, policy) as opa:
        folded_url = _workload(ctx, pg)
        if ctx.quick:  # one api a side, reads then ingest (api starts are most of the time)
            for n, side in enumerate(SIDES):
                with metastore(
                    "api", folded_url, ctx.log_dir, _env(side, tokens, policy, opa)
                ) as api:
                    ctx.say(f"authz: reads and ingest, authorization {side}")
                    read_runs[side].append(_reads(ctx, api))
                    runs[side].append(_ingest(ctx, api, salt=8 + 2 * n))
        else:
            # There and back (none, policy, opa, opa, policy, none): the machine's drift
            # during the group weighs on every side alike; each ingest into a fresh database.
            order = SIDES + SIDES[::-1]
            for n, side in enumerate(order):
                url = pg.database()
                with metastore("api", url, ctx.log_dir, _env(side, tokens, policy, opa)) as api:
                    ctx.say(f"authz: ingest, authorization {side}")
                    runs[side].append(_ingest(ctx, api, salt=8 + 2 * n))
            for side in order:
                with metastore(
                    "api", folded_url, ctx.log_dir, _env(side, tokens, policy, opa)
                ) as api:
                    ctx.say(f"authz: reads, authorization {side}")
                    read_runs[side].append(_reads(ctx, api))
    for side in SIDES:
        ingest[side] = _combined(runs[side])
        reads[side] = statistics.mean(read_runs[side])
    when = now()
    base = ingest["none"]
    for i, side in enumerate(SIDES[1:]):
        rate, read = out[2 * i], out[2 * i + 1]
        result = ingest[side]
        rate.value, rate.baseline = result.rate, base.rate
        rate.check = at_least(base.rate / 1.1)
        rate.client = result.tool
        how = (
            "once, into the reads' database (--quick)"
            if ctx.quick
            else "twice (sides in the order none, policy, opa, opa, policy, none), each run "
            "into a fresh database"
        )
        rate.note = (
            f"{ctx.sizes.ingest_connections} connections, {ctx.sizes.ingest_seconds:g} s after "
            f"a {ctx.sizes.warmup_seconds:g} s warm-up, {how}; "
            f"{result.requests:,} answered 2xx, {result.errors:,} errors "
            f"(baseline {base.requests:,} and {base.errors:,}); p99 {result.p99_ms:.1f} ms "
            f"(baseline {base.p99_ms:.1f} ms). The policy lets the Spark token write "
            f"{', '.join(namespaces)} (10 write rules)."
        )
        read.value, read.baseline = reads[side], reads["none"]
        read.check = below(reads["none"] * 1.2)
        read.note = (
            f"median of {max(len(READS), ctx.sizes.read_queries)} GETs one at a time"
            f"{'' if ctx.quick else ' (the mean of two runs, sides there and back)'}, "
            f"{', '.join(READS)} in turn, as a user whose group may read the event's "
            f"namespaces; over {READ_EVENTS // (10 if ctx.quick else 1):,} workload events, folded."
        )
    for r in out:
        r.measured_at = when
