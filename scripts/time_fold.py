"""Times the fold (`catch_up`) and the envelope check of the conformance events, A/B.

    .venv/bin/python scripts/time_fold.py --copies 300 --rounds 3 [--other SRC]

Loads `--copies` copies of the conformance scenarios (each copy with its own runIds) into
a throwaway PostgreSQL, then folds them `--rounds` times into fresh copies of that
database, alternating this checkout's code with the code in `--other` (a source tree, e.g.
`git archive main | tar -x -C /tmp/main-src`), each fold in a child process. Prints the
fold rate of each run and the envelope check's µs an event (best of five passes over the
events, in a child process, alternating too). A shared machine drifts: read
the pairs, not one figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from metastore.embedded_pg import EmbeddedPostgres  # noqa: E402
from metastore.envelope import parse_event  # noqa: E402
from metastore.eventlog import append_events  # noqa: E402
from metastore.migrations import apply_migrations  # noqa: E402

CONFORMANCE = ROOT.parent / "shared" / "conformance" / "scenarios"

# The read models are made anew by the code being timed (not timed): tables of another
# version would not be folded into at all (they wait for a rebuild), and that side would
# look fast.
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
count = catch_up(sys.argv[1])
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


def child(src: Path, code: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=src, capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--other", type=Path, help="the source tree to compare with")
    args = parser.parse_args()
    texts = scenario_texts(args.copies)
    trees = [("this", ROOT)] + ([("other", args.other.resolve())] if args.other else [])
    with tempfile.NamedTemporaryFile("w", suffix=".ndjson") as lines:
        lines.write("\n".join(texts))
        lines.flush()
        for round_ in range(args.rounds):
            for name, src in trees if round_ % 2 == 0 else trees[::-1]:
                micros = float(child(src, CHECK, lines.name))
                print(f"round {round_ + 1} envelope check ({name}): {micros:.2f} µs an event")
    pg = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="time-fold-", dir="/tmp")), fast_unsafe=True)
    url = pg.start()
    try:
        apply_migrations(url)
        with psycopg.connect(url) as conn:
            records = [parse_event(t.encode()) for t in texts]
            for start in range(0, len(records), 1000):
                with conn.transaction():
                    append_events(conn, records[start : start + 1000])
        base = url.rsplit("/", 1)[0]
        with psycopg.connect(url, autocommit=True) as conn:
            template = conn.info.dbname
        for round_ in range(args.rounds):
            order = trees if round_ % 2 == 0 else trees[::-1]
            for name, src in order:
                db = f"fold_{round_}_{name}"
                with psycopg.connect(base + "/postgres", autocommit=True) as admin:
                    admin.execute(f"CREATE DATABASE {db} TEMPLATE {template}")
                count, seconds = child(src, FOLD, f"{base}/{db}").split()
                rate = int(count) / float(seconds)
                print(
                    f"round {round_ + 1} {name}: {count} events in {float(seconds):.1f} s, "
                    f"{rate:,.0f} events/s"
                )
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
