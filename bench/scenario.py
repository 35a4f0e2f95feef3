"""The measurements of one change, each a named scenario of the bench harness.

    python -m bench.scenario                                  # the scenarios, a line each
    python -m bench.scenario NAME --help                      # one scenario's options
    python -m bench.scenario reads --other main --rounds 3    # this checkout against main

`make bench` (bench/run.py) measures the figures that have targets, the same every run, and
`python -m bench.ab BEFORE AFTER --only GROUP` compares two commits on one of its groups. A
scenario measures what a change was about and `make bench` does not: it builds its store
(bench/harness.py: a throwaway PostgreSQL, the workload of bench/datagen.py or its own
cases), and where it compares, times this checkout against `--other` in turns
(bench/ab.py: `--other` is a source tree or anything `git rev-parse` accepts, checked out
for the run). docs/PERFORMANCE.md cites each figure's command.

To add a scenario: see "How to add a scenario" in bench/README.md.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import sys
from pathlib import Path

# name -> module (a docstring, whose first paragraph is the summary, and `main(argv) -> int`).
# The ones in bench/scenarios/ were scripts once; the others were written as modules of
# bench/ and are still run as `python -m bench.<module>` too (docs/PERFORMANCE.md cites both).
SCENARIOS = {
    "reads": "bench.scenarios.reads",
    "search": "bench.scenarios.search",
    "field-search-buffers": "bench.scenarios.field_search_buffers",
    "search-split": "bench.scenarios.search_split",
    "name-replicas": "bench.scenarios.name_replicas",
    "fold": "bench.scenarios.fold",
    "live-fold": "bench.scenarios.live_fold",
    "live-batches": "bench.scenarios.live_batches",
    "lag-timeline": "bench.scenarios.lag_timeline",
    "lag-statements": "bench.scenarios.lag_statements",
    "graph": "bench.scenarios.graph",
    "graph-requests": "bench.scenarios.graph_requests",
    "column-requests": "bench.scenarios.column_requests",
    "column-walk": "bench.scenarios.column_walk",
    "list-freshness": "bench.scenarios.list_freshness",
    "namespace-counts": "bench.scenarios.namespace_counts",
    "list-totals": "bench.scenarios.list_totals",
    "list-plans": "bench.scenarios.list_plans",
    "fold-index-cost": "bench.scenarios.fold_index_cost",
    "fold-statements": "bench.scenarios.fold_statements",
    "root-paths": "bench.scenarios.root_paths",
    "fold-ratio": "bench.scenarios.fold_ratio",
    "fold-answers": "bench.scenarios.fold_answers",
    "log-index-build": "bench.scenarios.log_index_build",
    "run-states": "bench.scenarios.run_states",
    "read-planning": "bench.scenarios.read_planning",
    "bounded": "bench.scenarios.bounded",
    "hostile-fold": "bench.scenarios.hostile_fold",
    "authz-ingest-cpu": "bench.authz_ingest_cpu",
    "fold-health-cost": "bench.fold_health_cost",
    "lateness-rates": "bench.lateness_rates",
    "log-column": "bench.log_column",
    "pool-check": "bench.pool_check",
    "scale-alternatives": "bench.scale_alternatives",
    "scale-decode": "bench.scale_decode",
    "scale-profile": "bench.scale_profile",
    "scale-requery": "bench.scale_requery",
    "scale-storage": "bench.scale_storage",
}
ROOT = Path(__file__).resolve().parent.parent


def parser(
    name: str, doc: str | None, other: bool = True, rounds: int | None = 3
) -> argparse.ArgumentParser:
    """A scenario's command line: its docstring as help and, for an A/B of trees, `--other`
    (for bench/ab.py's other_tree) and `--rounds` (for its turns; None: no rounds)."""
    found = argparse.ArgumentParser(
        prog=f"python -m bench.scenario {name}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if other:
        found.add_argument(
            "--other",
            help="the tree to compare with: a directory (a source tree), or a commit",
        )
    if rounds is not None:
        found.add_argument("--rounds", type=int, default=rounds, help="turns of each side")
    return found


def summary(module: str) -> str:
    """The first paragraph of a scenario's docstring, read without importing it."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return " ".join((ast.get_docstring(tree) or "").split("\n\n", 1)[0].split())


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "--list"):
        print(__doc__.split("\n", 1)[0] + "\n")
        width = max(map(len, SCENARIOS))
        for name, module in SCENARIOS.items():
            print(f"  {name:<{width}}  {summary(module)}")
        print("\npython -m bench.scenario NAME --help for one's options")
        return 0
    if args[0] not in SCENARIOS:
        print(f"unknown scenario {args[0]!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    scenario = importlib.import_module(SCENARIOS[args[0]])
    sys.argv = [f"python -m bench.scenario {args[0]}", *args[1:]]  # (for a main() that reads it)
    run = scenario.main
    code = run(args[1:]) if inspect.signature(run).parameters else run()
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
