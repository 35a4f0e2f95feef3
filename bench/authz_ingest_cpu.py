"""The API's CPU time per ingested event, with and without authorization, A/B.

    .venv/bin/python -m bench.authz_ingest_cpu [--other SRC] [--events 20000] [--rounds 3]
    .venv/bin/python -m bench.authz_ingest_cpu --in-process [--events 20000] [--rounds 2]

CPU seconds of the `metastore api` process (from /proc, user + system) per event, while 16
connections post fig_ingest's 3 KB Spark event with a fresh runId per request: on a shared
machine whose throughput drifts by a third, the CPU an event costs the api drifts far
less. Sides: this checkout without authorization, with the values' policy file, with OPA
(bench/opa_server.py, the chart's Rego, a process of its own), and `--other`'s tree (e.g.
`git worktree add --detach /tmp/base BASE`) without authorization; in turns, the order
swapped each round, each run into a fresh database. Every api runs with named tokens.

`--in-process` times the decision alone: the ingest ASGI app in this process, its group
committer a stand-in that stores nothing, CPU per request with each authorizer.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from bench import datagen, fig_authz, loadgen
from bench.fig_ingest import PATH
from bench.harness import cluster, cpu_seconds, metastore
from bench.opa_server import opa_server
from metastore.authz import Authorizer, OpenAuthorizer, PolicyAuthorizer
from metastore.config import OpaSettings, load_settings
from metastore.inflight import InflightBudget
from metastore.ingest import IngestApp
from metastore.opa import OpaAuthorizer
from metastore.policy import Policy, PolicyFile
from metastore.principal import Principal, set_principal

ROOT = Path(__file__).resolve().parent.parent


class _Storing:
    """A group committer that stores nothing: what is timed is ingest's own work."""

    async def append(self, records: list[Any]) -> list[None]:
        return [None] * len(records)


def in_process(events: int, rounds: int) -> None:
    policy = fig_authz._policy(fig_authz._namespaces())
    head, tail = datagen.spark_event_template()
    principal = Principal("spark-sales", "service")
    with opa_server(policy) as opa:

        async def run() -> None:
            sides: dict[str, Authorizer] = {
                "none": OpenAuthorizer(),
                "policy": PolicyAuthorizer(Policy(msgspec.convert(policy, PolicyFile))),
                "opa": OpaAuthorizer(OpaSettings(url=opa.url, package="metastore")),
            }
            for _ in range(rounds):
                for name, authorizer in sides.items():
                    app = IngestApp(
                        _Storing(),  # type: ignore[arg-type]
                        load_settings({}),
                        InflightBudget(2**40),
                        authorizer,
                    )
                    started = time.process_time()
                    for i in range(events):
                        body = datagen.body_with_id(head, tail, i)
                        scope = {
                            "type": "http",
                            "method": "POST",
                            "path": PATH,
                            "headers": [(b"content-type", b"application/json")],
                        }
                        set_principal(scope, principal)
                        sent: list[Any] = []

                        async def receive(body: bytes = body) -> dict[str, Any]:
                            return {"type": "http.request", "body": body, "more_body": False}

                        async def send(message: Any, sent: list[Any] = sent) -> None:
                            sent.append(message)

                        await app(scope, receive, send)
                        assert sent[0]["status"] == 200, sent
                    used = (time.process_time() - started) / events * 1e6
                    print(f"{name}: {used:.1f} us CPU/request")

        asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--other", type=Path, help="a source tree to compare (no authorization)")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-process", action="store_true", help="the decision alone")
    args = parser.parse_args()
    if args.in_process:
        in_process(args.events, args.rounds)
        return
    log_dir = Path(tempfile.mkdtemp(prefix="authz-cpu-"))
    tokens, policy = fig_authz._files(log_dir, fig_authz._namespaces())
    head, tail = datagen.spark_event_template()
    sides = [("none", ROOT), ("policy", ROOT), ("opa", ROOT)]
    if args.other:
        sides.append(("other", args.other))
    results: dict[str, list[float]] = {name: [] for name, _ in sides}
    with cluster("authz-cpu") as pg, fig_authz._opa(log_dir, policy) as opa:
        for round_ in range(args.rounds):
            for n, (name, tree) in enumerate(sides if round_ % 2 == 0 else sides[::-1]):
                env = fig_authz._env("none" if name == "other" else name, tokens, policy, opa)
                with metastore("api", pg.database(), log_dir, env, cwd=tree) as api:
                    before = cpu_seconds(api.pid)
                    base = (round_ * 8 + n) << 40

                    def body(i: int, base: int = base) -> bytes:
                        return datagen.body_with_id(head, tail, base + i)

                    result = loadgen.closed_loop(
                        api.base_url,
                        PATH,
                        body,
                        16,
                        count=args.events,
                        token=fig_authz.INGEST_TOKEN,
                    )
                    used = cpu_seconds(api.pid) - before
                assert result.errors == 0, f"{name}: {result.errors} errors"
                results[name].append(used / result.requests * 1e6)
                print(f"round {round_ + 1} {name}: {results[name][-1]:.0f} us CPU/event")
    for name, values in results.items():
        print(f"{name}: " + " / ".join(f"{v:.0f}" for v in values) + " us CPU/event")


if __name__ == "__main__":
    main()
