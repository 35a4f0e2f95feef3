"""The query figures of bench-scale again, against the store a scale run left (`--keep`).

An A/B of read paths at the largest size without loading it again: run it from each tree
against the same store, one after the other (each tree's API, its own code), and compare.

    python -m bench.run --scale --keep            # prints the store's URL at the end
    python -m bench.scale_requery URL --out a.json        # in tree A
    python -m bench.scale_requery URL --out b.json        # in tree B
    python -m bench.scale_requery --compare a.json b.json

The queries are those of the run (bench/scale.py, time_queries), drawn with the same seed,
at the middle of the log's time span as the run draws them.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import msgspec
import psycopg

from bench import scale, scale_corpus, scale_results
from bench.harness import ROOT, metastore
from bench.sizes import SEED

SPAN = "SELECT max(event_time), count(*) FROM event_log"


class Requery(msgspec.Struct):
    tree: str  # the commit the API ran
    events: int
    figures: list[scale_results.Figure]


def requery(url: str, seed: int, log_dir: Path) -> Requery:
    with psycopg.connect(url) as conn:
        span = conn.execute(SPAN).fetchone()
    assert span is not None and span[0] is not None, "the store holds no events"
    last, events = span
    ctx = scale.context(events, seed, log_dir)
    middle = scale_corpus.START + (last - scale_corpus.START) / 2
    figures: list[scale_results.Figure] = []
    with metastore("api", url, log_dir, scale.catalog_env(log_dir)) as api:
        scale.time_queries(ctx, url, api, middle, figures, ctx.sizes.read_queries)
    tree = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return Requery(tree, int(events), figures)


def table(r: Requery) -> str:
    lines = [f"| figure ({r.events:,} events) | {r.tree} |", "| --- | --- |"]
    lines += [f"| {f.name} | {f.value:,.2f} |" for f in r.figures if f.value is not None]
    return "\n".join(lines)


def compare(a: Requery, b: Requery) -> str:
    lines = [
        f"| figure | {a.tree} | {b.tree} | ratio |",
        "| --- | --- | --- | --- |",
    ]
    after = {f.name: f for f in b.figures}
    for f in a.figures:
        g = after.get(f.name)
        if f.unit != "ms" or g is None or f.value is None or g.value is None:
            continue
        lines.append(f"| {f.name} | {f.value:,.2f} | {g.value:,.2f} | {g.value / f.value:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_requery", description=__doc__)
    parser.add_argument("url", nargs="?", help="the kept store (printed by --keep)")
    parser.add_argument("--out", help="write the figures here (JSON)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--compare", nargs=2, metavar="JSON", help="two --out files")
    args = parser.parse_args(argv)
    if args.compare:
        a, b = (msgspec.json.decode(Path(p).read_bytes(), type=Requery) for p in args.compare)
        print(compare(a, b))
        return 0
    if not args.url:
        parser.error("a store's URL, or --compare")
    with tempfile.TemporaryDirectory(prefix="metastore-requery-") as tmp:
        result = requery(args.url, args.seed, Path(tmp))
    if args.out:
        Path(args.out).write_bytes(msgspec.json.encode(result))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
