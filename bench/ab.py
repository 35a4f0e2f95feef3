"""A/B: one benchmark group at two commits, alternating, for the figures of a change.

    python -m bench.ab BEFORE AFTER --only ingest [--rounds 3] [--quick]

This machine's speed drifts by a third within an hour, so one run of each side says little:
the two sides run in turns (the order swapped each round), each in a checkout of its commit
(a `git worktree` in a temporary folder) with this venv, and every figure is printed per
round beside its ratio to the same run's baseline. docs/PERFORMANCE.md names the commits
and the group of each change it records.

The scenarios (bench/scenario.py) take their other side from here too: `other_tree` and
`turns` are the A/B of any measurement between this checkout and another tree.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from bench.harness import ROOT
from bench.report import parse_table
from bench.run import GROUPS

T = TypeVar("T")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


@contextlib.contextmanager
def checkout(commit: str) -> Iterator[Path]:
    """The commit in a temporary `git worktree` (detached), removed when the block ends."""
    with tempfile.TemporaryDirectory(prefix="metastore-ab-") as tmp:
        path = Path(tmp) / _git("rev-parse", "--short", commit)
        _git("worktree", "add", "--detach", str(path), commit)
        try:
            yield path
        finally:
            _git("worktree", "remove", "--force", str(path))


@contextlib.contextmanager
def tree(spec: str | None) -> Iterator[Path]:
    """This checkout (None), a source tree (a directory, e.g. `git archive main | tar -x -C
    /tmp/main`) as it is, or anything `git rev-parse` accepts, checked out for the block."""
    if spec is None:
        yield ROOT
    elif Path(spec).is_dir():
        yield Path(spec).resolve()
    else:
        with checkout(spec) as path:
            yield path


@contextlib.contextmanager
def other_tree(other: str | None, this: str | None = None) -> Iterator[list[tuple[str, Path]]]:
    """The sides of an A/B: ("this", this checkout or the tree `this`), then ("other", the
    tree `other`) when given (see `tree`)."""
    with tree(this) as this_side:
        if other is None:
            yield [("this", this_side)]
        else:
            with tree(other) as other_side:
                yield [("this", this_side), ("other", other_side)]


def turns(sides: Sequence[T], rounds: int) -> Iterator[tuple[int, T]]:
    """(round, side) for every side each round, the order swapped every other round: this
    machine drifts by a third within an hour, so neither side always goes first."""
    for round_ in range(rounds):
        for side in sides if round_ % 2 == 0 else sides[::-1]:
            yield round_, side


def _run(checkout: Path, group: str, quick: bool, out: Path) -> dict[str, dict[str, str]]:
    argv = [sys.executable, "-m", "bench.run", "--only", group, "--out", str(out)]
    if quick:
        argv.append("--quick")
    subprocess.run(argv, cwd=checkout, check=True)
    text = out.read_text()
    table = parse_table(text)
    # a figure's note that states its median ("p50 12.34 ms"): printed beside its value
    for figure, median in P50.findall(text):
        if figure in table:
            table[figure]["p50"] = median
    return table


P50 = re.compile(r"^- \*\*(.+?)\*\*: .*?\bp50 ([\d.]+) ms", re.M)


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
    with (
        tempfile.TemporaryDirectory(prefix="metastore-ab-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        checkouts = {name: stack.enter_context(checkout(commit)) for name, commit in sides.items()}
        for round_, name in turns(list(sides), args.rounds):
            out = Path(tmp) / f"{sides[name]}-{round_}.md"
            results[name].append(_run(checkouts[name], args.only, args.quick, out))
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
            medians = " / ".join(c.get("p50", "-") for c in cells)
            print(f"  {commit}: {values}   (p50 {medians}; ratio to baseline {ratios})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
