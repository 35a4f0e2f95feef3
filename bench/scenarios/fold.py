"""The fold (`catch_up`) and the envelope check of the conformance events, A/B.

    python -m bench.scenario fold [--copies 300] [--rounds 3] [--other TREE]

Loads `--copies` copies of the conformance scenarios (each copy with its own runIds) into
a throwaway PostgreSQL, then folds them `--rounds` times into fresh copies of that
database, alternating this checkout's code with the other tree's, each fold in a child
process. Prints the fold rate of each run and the envelope check's µs an event (best of
five passes over the events, in a child process, alternating too). Formerly
scripts/time_fold.py. A shared machine drifts: read the pairs, not one figure.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path

import psycopg

from bench.ab import other_tree, turns
from bench.harness import ROOT, cluster, python_child
from bench.scenario import parser
from metastore.envelope import parse_event
from metastore.eventlog import append_events

CONFORMANCE = ROOT.parent / "shared" / "conformance" / "scenarios"

# The read models are made anew by the code being timed (not timed): tables of another
# version would not be folded into at all (they wait for a rebuild), and that side would
# look fast. Its arguments: the database's URL, then the batch size (catch_up's default
# without it).
FOLD = """
import sys, time, psycopg
from projections.runner import catch_up
from projections.schema import create_readmodel_tables
with psycopg.connect(sys.argv[1]) as conn:
    conn.execute("DROP SCHEMA readmodel CASCADE")
    conn.execute("CREATE SCHEMA readmodel")
    conn.execute("DELETE FROM projection_state")
    conn.commit()
    create_readmodel_tables(conn)
started = time.perf_counter()
count = catch_up(sys.argv[1], *map(int, sys.argv[2:3]))
print(count, time.perf_counter() - started)
"""
CHECK = """
import sys, time
from metastore.envelope import parse_event
texts = [line.encode() for line in open(sys.argv[1]).read().splitlines()]
best = 1e9
for _ in range(5):
    started = time.perf_counter()
    for text in texts:
        parse_event(text)
    best = min(best, time.perf_counter() - started)
print(best / len(texts) * 1e6)
"""


def scenario_texts(copies: int) -> list[str]:
    events = [
        json.loads(p.read_bytes())
        for folder in sorted(CONFORMANCE.iterdir())
        for p in sorted(folder.glob("*.json"))
    ]
    texts = [json.dumps(e) for e in events]
    run_ids = sorted({e["run"]["runId"] for e in events if "run" in e})
    result = []
    for i in range(copies):
        mapping = {r: str(uuid.uuid5(uuid.NAMESPACE_OID, f"{i}:{r}")) for r in run_ids}
        for text in texts:
            for old, new in mapping.items():
                text = text.replace(old, new)
            result.append(text)
    return result


def main(argv: list[str]) -> int:
    cli = parser("fold", __doc__)
    cli.add_argument("--copies", type=int, default=300)
    args = cli.parse_args(argv)
    texts = scenario_texts(args.copies)
    with (
        other_tree(args.other) as sides,
        tempfile.TemporaryDirectory(prefix="metastore-fold-") as tmp,
    ):
        logs = Path(tmp)
        lines = logs / "events.ndjson"
        lines.write_text("\n".join(texts))
        for round_, (name, tree) in turns(sides, args.rounds):
            micros = float(python_child(CHECK, [str(lines)], logs / "check.log", cwd=tree))
            print(f"round {round_ + 1} envelope check ({name}): {micros:.2f} µs an event")
        with cluster("fold", warm=False, durable=False) as pg:
            url = pg.database()
            with psycopg.connect(url) as conn:
                records = [parse_event(t.encode()) for t in texts]
                for start in range(0, len(records), 1000):
                    with conn.transaction():
                        append_events(conn, records[start : start + 1000])
            for round_, (name, tree) in turns(sides, args.rounds):
                target = pg.copy(url, f"fold_{round_}_{name}")
                count, seconds = python_child(FOLD, [target], logs / "fold.log", cwd=tree).split()
                rate = int(count) / float(seconds)
                print(
                    f"round {round_ + 1} {name}: {count} events in {float(seconds):.1f} s, "
                    f"{rate:,.0f} events/s"
                )
    return 0
