"""Issue 35's reads (bench/fig_bounded.py) with two trees' code: time and answer size.

    python -m bench.scenario bounded --other BEFORE [--this AFTER] [--quick] [--rounds 1]

Each side builds the store of bench/fig_bounded.py with this checkout's generators (the
same events both times), then lets its tree's code migrate, fold (`metastore replay`)
and serve it, and times each read (`make bench`'s bounded group is the same with this
checkout's code alone). `--other` and `--this` are source trees or commits (checked out
for the run). The sides run in turns; compare the orders of magnitude, not the last
millisecond. Prints a markdown table a round. Formerly scripts/bounded_reads.py BEFORE
AFTER.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench import fig_bounded
from bench.ab import other_tree, turns
from bench.scenario import parser
from bench.sizes import SEED


def main(argv: list[str]) -> int:
    cli = parser("bounded", __doc__, rounds=1)
    cli.add_argument("--this", help="the tree timed as this side (default: this checkout)")
    cli.add_argument("--quick", action="store_true", help="the small store (to try it)")
    args = cli.parse_args(argv)
    store = fig_bounded.QUICK if args.quick else fig_bounded.FULL
    with (
        other_tree(args.other, args.this) as sides,
        tempfile.TemporaryDirectory(prefix="metastore-bounded-") as logs,
    ):
        rounds: list[dict[str, list[fig_bounded.Measured]]] = [{} for _ in range(args.rounds)]
        for round_, (name, tree) in turns(sides, args.rounds):
            rounds[round_][name] = fig_bounded.run(store, SEED, tree, Path(logs))
    names = [name for name, _ in sides][::-1]  # the other (before), then this
    for round_, found in enumerate(rounds):
        print(f"round {round_ + 1}")
        print(f"| read | {' ms | '.join(names)} ms | {' bytes | '.join(names)} bytes |")
        print("| --- |" + " --- |" * (2 * len(names)))
        for measured in zip(*(found[n] for n in names), strict=True):
            ms = " | ".join(f"{m.ms:,.1f}" for m in measured)
            size = " | ".join(f"{m.bytes:,}" for m in measured)
            print(f"| {measured[-1].figure} | {ms} | {size} |")
    return 0
