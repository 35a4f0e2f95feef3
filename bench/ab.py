"""A/B: one benchmark group at two commits, alternating, for the figures of a change.

    python -m bench.ab BEFORE AFTER --only ingest [--rounds 3] [--quick]

This machine's speed drifts by a third within an hour, so one run of each side says little:
the two sides run in turns (the order swapped each round), each in a checkout of its commit
(a `git worktree` in a temporary folder) with this venv, and every figure is printed per
round beside its ratio to the same run's baseline. docs/PERFORMANCE.md names the commits
and the group of each change it records.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.report import parse_table
from bench.run import GROUPS

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def _run(checkout: Path, group: str, quick: bool, out: Path) -> dict[str, dict[str, str]]:
    argv = [sys.executable, "-m", "bench.run", "--only", group, "--out", str(out)]
    if quick:
        argv.append("--quick")
    subprocess.run(argv, cwd=checkout, check=True)
    return parse_table(out.read_text())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("before", help="commit (or anything git rev-parse accepts)")
    parser.add_argument("after")
    parser.add_argument("--only", choices=GROUPS, required=True, help="the benchmark group")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (to try the tool)")
    args = parser.parse_args(argv)
    sides = {name: _git("rev-parse", "--short", name) for name in (args.before, args.after)}
    results: dict[str, list[dict[str, dict[str, str]]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory(prefix="metastore-ab-") as tmp:
        checkouts = {}
        for name, commit in sides.items():
            checkouts[name] = Path(tmp) / commit
            _git("worktree", "add", "--detach", str(checkouts[name]), commit)
        try:
            names = list(sides)
            for round_ in range(args.rounds):
                for name in names if round_ % 2 == 0 else names[::-1]:
                    out = Path(tmp) / f"{sides[name]}-{round_}.md"
                    results[name].append(_run(checkouts[name], args.only, args.quick, out))
        finally:
            for checkout in checkouts.values():
                _git("worktree", "remove", "--force", str(checkout))
    # (the before side's figures, then those only the after side has: a new row)
    first = {name: runs[0] for name, runs in results.items()}
    figures = [f for f in first[args.before] if first[args.before][f]["value"] != "n/a"]
    figures += [
        f
        for f in first[args.after]
        if f not in first[args.before] and first[args.after][f]["value"] != "n/a"
    ]
    for figure in figures:
        print(f"{figure}:")
        for name, commit in sides.items():
            cells = [run.get(figure, {}) for run in results[name]]
            values = " / ".join(c.get("value", "?") for c in cells)
            ratios = " / ".join(c.get("ratio", "-") for c in cells)
            print(f"  {commit}: {values}   (ratio to baseline {ratios})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
