"""Issue 35's reads before and after a change: time and answer size, one table.

    python scripts/bounded_reads.py BEFORE AFTER [--quick]

Each commit is checked out in a temporary `git worktree`; `python -m bench.fig_bounded
--code <checkout>` (from this checkout, so both sides get the same store and reads) builds
the store of bench/fig_bounded.py, lets that commit's code migrate, fold and serve it, and
times each read. The sides run one after the other on this machine (shared: compare the
orders of magnitude, not the last millisecond). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _side(commit: str, tmp: Path, quick: bool) -> list[dict[str, object]]:
    checkout = tmp / commit
    _git("worktree", "add", "--detach", str(checkout), commit)
    try:
        out = tmp / f"{commit}.json"
        argv = [sys.executable, "-m", "bench.fig_bounded", "--code", str(checkout)]
        argv += ["--json", str(out)] + (["--quick"] if quick else [])
        subprocess.run(argv, cwd=ROOT, check=True)
        found: list[dict[str, object]] = json.loads(out.read_text())
        return found
    finally:
        _git("worktree", "remove", "--force", str(checkout))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--quick", action="store_true", help="the small store (to try it)")
    args = parser.parse_args()
    commits = [_git("rev-parse", "--short", c) for c in (args.before, args.after)]
    with tempfile.TemporaryDirectory(prefix="metastore-bounded-") as tmp:
        before, after = (_side(c, Path(tmp), args.quick) for c in commits)
    print(f"| read | {commits[0]} ms | {commits[1]} ms | {commits[0]} bytes | {commits[1]} bytes |")
    print("| --- | --- | --- | --- | --- |")
    for b, a in zip(before, after, strict=True):
        print(
            f"| {a['figure']} | {b['ms']:,.1f} | {a['ms']:,.1f} | {b['bytes']:,} | {a['bytes']:,} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
