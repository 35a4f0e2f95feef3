"""The API's CPU time per ingested event, with and without authorization, A/B.

    .venv/bin/python scripts/authz_ingest_cpu.py [--other SRC] [--events 20000] [--rounds 3]

CPU seconds of the `metastore api` process (from /proc, user + system) per event, while 16
connections post fig_ingest's 3 KB Spark event with a fresh runId per request: on a shared
machine whose throughput drifts by a third, the CPU an event costs the api drifts far
less. Sides: this checkout without authorization, with the values' policy file, with OPA
(bench/opa_server.py, the chart's Rego, a process of its own), and `--other`'s tree (e.g.
`git worktree add --detach /tmp/base BASE`) without authorization; in turns, the order
swapped each round, each run into a fresh database. Every api runs with named tokens.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import datagen, fig_authz, loadgen  # noqa: E402
from bench.fig_ingest import PATH  # noqa: E402
from bench.harness import cluster, cpu_seconds, metastore  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--other", type=Path, help="a source tree to compare (no authorization)")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
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
                    result = loadgen.closed_loop(
                        api.base_url,
                        PATH,
                        lambda i, base=base: datagen.body_with_id(head, tail, base + i),
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
