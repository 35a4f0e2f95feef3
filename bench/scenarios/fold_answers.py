"""Whether a change to the fold changed what it folds: each read model against another tree's.

    python -m bench.scenario fold-answers --other TREE [--events 30000] [--limits 2000,97]

Appends one log to a throwaway PostgreSQL: every conformance scenario (../shared/
conformance/scenarios), then `--events` events of make bench's lag workload
(bench/datagen.py) in order, then half as many more of another seed shuffled in windows of
300 (starts after their ends, children before their parents). Each tree folds a copy of it
(`catch_up`, into read models made by its own DDL) in batches of each of `--limits`; then
every read-model table of the two is compared row for row (the md5 of its rows' text,
sorted). Prints each table that differs, or none, and each side's dead letters. A change
that should not change answers (a faster fold, another way to send the rows) shows none.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from bench import datagen
from bench.ab import other_tree
from bench.harness import cluster, python_child
from bench.scenario import parser
from bench.scenarios.fold import FOLD, scenario_texts
from metastore.envelope import parse_event
from metastore.eventlog import append_events

SHUFFLED_WINDOW = 300
TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'readmodel' AND c.relkind IN ('r', 'p') ORDER BY 1
"""
DIGEST = """
SELECT count(*), md5(coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), ''))
FROM readmodel.{} x
"""


def main(argv: list[str]) -> int:
    cli = parser("fold-answers", __doc__, rounds=None)
    cli.add_argument("--events", type=int, default=30_000)
    cli.add_argument("--limits", default="2000,97", help="batch sizes, comma-separated")
    cli.add_argument("--seed", type=int, default=20241017)
    args = cli.parse_args(argv)
    limits = [int(limit) for limit in args.limits.split(",")]
    with (
        other_tree(args.other) as sides,
        tempfile.TemporaryDirectory(prefix="metastore-fold-answers-") as tmp,
        cluster("fold-answers", warm=False, durable=False) as pg,
    ):
        url = pg.database()
        _append_log(url, args.events, args.seed)
        for limit in limits:
            digests = []
            for name, tree in sides:
                target = pg.copy(url, f"answers_{limit}_{name}")
                log = Path(tmp) / "fold.log"
                count = python_child(FOLD, [target, str(limit)], log, cwd=tree).split()[0]
                found, dead = _digests(target)
                print(f"{name} ({tree}), batches of {limit}: {count} events, {dead} dead letters")
                digests.append(found)
            if len(digests) == 2:
                ours, theirs = digests
                differ = [
                    t for t in sorted(ours.keys() | theirs.keys()) if ours.get(t) != theirs.get(t)
                ]
                rows = sum(n for n, _ in ours.values())
                print(
                    f"batches of {limit}: {len(ours)} tables, {rows:,} rows; "
                    f"differ: {', '.join(differ) or 'none'}"
                )
    return 0


def _append_log(url: str, events: int, seed: int) -> None:
    late = [datagen.to_record(b) for b in datagen.events(100_000, events // 2, seed + 1)]
    shuffle = random.Random(seed)
    for start in range(0, len(late), SHUFFLED_WINDOW):
        window = late[start : start + SHUFFLED_WINDOW]
        shuffle.shuffle(window)
        late[start : start + SHUFFLED_WINDOW] = window
    in_order = [datagen.to_record(b) for b in datagen.events(100_000, events, seed)]
    with psycopg.connect(url, autocommit=True) as conn:
        append_events(conn, [parse_event(text.encode()) for text in scenario_texts(1)])
        for records in (in_order, late):
            for start in range(0, len(records), SHUFFLED_WINDOW):
                append_events(conn, records[start : start + SHUFFLED_WINDOW])


def _digests(url: str) -> tuple[dict[str, tuple[Any, ...]], int]:
    with psycopg.connect(url) as conn:
        tables = [table for (table,) in conn.execute(TABLES)]
        found = {}
        for table in tables:
            row = conn.execute(DIGEST.format(table)).fetchone()
            assert row is not None
            found[table] = tuple(row)
        dead = conn.execute("SELECT count(*) FROM dead_letters").fetchone()
    return found, dead[0] if dead else 0
