"""The fold's decode alone (projections.decode.fold_event) on the scale corpus, A/B.

    python -m bench.scale_decode --events 50000 [--rounds 3] [--other SRC ...]

Generates the first `--events` events of the scale corpus (bench/scale_corpus.py) with
their envelopes once, then times decoding them as the projector's prefetch thread does
(with the corpus's catalog map; best of three passes), in a child process per round,
alternating this checkout's code with the code in each `--other` (a source tree, or a
commit checked out for the run: bench/ab.py). Also `python -m bench.scenario scale-decode`.
No database: this is the part of the fold's read-and-decode baseline that is Python.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import pickle
import tempfile
from pathlib import Path
from typing import Any

from bench.ab import tree, turns
from bench.harness import ROOT, python_child

# Best of three passes (this machine is shared), each with the decoder's caches emptied
# (a pass over the same events again would find every facet in them).
CHILD = """
import pickle, sys, time, datetime as dt
from metastore.catalogs import parse_catalog_map
from metastore.eventlog import Position
from projections import decode
records, catalogs_text = pickle.load(open(sys.argv[1], "rb"))
catalogs = parse_catalog_map(catalogs_text, "catalogs.yaml")
now = dt.datetime.now(dt.timezone.utc)
best = None
for _ in range(3):
    for cache in ("_known_schemas", "_known_reports"):
        getattr(decode, cache, {}).clear()
    started = time.perf_counter()
    for seq, r in enumerate(records, 1):
        decode.fold_event(Position(1, seq), now, *r[:6], r[6], catalogs)
    took = time.perf_counter() - started
    best = took if best is None else min(best, took)
print(len(records) / best)
"""


def _records(events: int, seed: int) -> list[tuple[Any, ...]]:
    from bench import scale_corpus
    from metastore.envelope import parse_event

    out: list[tuple[Any, ...]] = []
    for body in scale_corpus.events(events, seed):
        r = parse_event(body)
        out.append(
            (r.event_time, r.kind, r.event_type, r.run_id, r.job_namespace, r.job_name, body)
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20241017)
    parser.add_argument(
        "--other", action="append", default=[], help="another tree or commit (repeatable)"
    )
    args = parser.parse_args()
    from bench.scale_corpus import catalogs_yaml

    started = dt.datetime.now()
    with (
        tempfile.TemporaryDirectory(prefix="metastore-decode-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        data = Path(tmp) / "records.pickle"
        data.write_bytes(pickle.dumps((_records(args.events, args.seed), catalogs_yaml())))
        print(f"{args.events:,} events generated in {dt.datetime.now() - started}", flush=True)
        others = [stack.enter_context(tree(o)) for o in args.other]
        sides = [("this", ROOT)] + [(f"other{i}", o) for i, o in enumerate(others)]
        for round_, (name, src) in turns(sides, args.rounds):
            rate = python_child(CHILD, [str(data)], Path(tmp) / "decode.log", cwd=src)
            print(f"round {round_ + 1} {name:5} ({src}): {float(rate):,.0f} events/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
