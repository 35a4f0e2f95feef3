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
import sys
from pathlib import Path

# name -> module (bench/scenarios/<module>.py, with a docstring and `main(argv) -> int`)
SCENARIOS = {
    "reads": "reads",
    "search": "search",
    "fold": "fold",
    "graph": "graph",
    "list-freshness": "list_freshness",
    "namespace-counts": "namespace_counts",
    "fold-index-cost": "fold_index_cost",
    "bounded": "bounded",
    "hostile-fold": "hostile_fold",
    "failed-run-example": "failed_run_example",
}
FOLDER = Path(__file__).resolve().parent / "scenarios"


def parser(name: str, doc: str | None, other: bool = True) -> argparse.ArgumentParser:
    """A scenario's command line: its docstring as help and, for an A/B, `--other` and
    `--rounds` (bench/ab.py's other_tree and turns take them)."""
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
        found.add_argument("--rounds", type=int, default=3, help="turns of each side")
    return found


def summary(module: str) -> str:
    """The first line of a scenario's docstring, read without importing it."""
    tree = ast.parse((FOLDER / f"{module}.py").read_text(encoding="utf-8"))
    return (ast.get_docstring(tree) or "").split("\n", 1)[0]


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
    module = importlib.import_module(f"bench.scenarios.{SCENARIOS[args[0]]}")
    code: int = module.main(args[1:])
    return code


if __name__ == "__main__":
    sys.exit(main())
