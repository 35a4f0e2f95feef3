"""GET /api/v1/search's p95 on a store of many names, this checkout against another tree.

    python -m bench.scenario search --other TREE [--datasets 500000] [--jobs 200000]
    python -m bench.scenario search --other TREE --url URL   # a store there is

Writes `--datasets` datasets (two names each) and `--jobs` jobs straight into the read
models (bench/search_store.py) of a throwaway PostgreSQL, then serves them with `metastore
api` from each tree in turns and times the searches Cockpit's search box sends (a whole
name, its first eight characters, a word of it: bench/fig_search.py), each first page and
the next. The other tree is timed on the indexes its own DDL makes: this checkout's
trigram indexes are dropped for its turn. Last, whether both trees answered every page the
same (the bodies of each one's last round). With `--url`, the store there is (say, one
`make bench-scale SCALE_ARGS=--keep` left) is searched as it is, its indexes untouched:
for a tree whose DDL has the trigram indexes too. Formerly scripts/time_search.py. A
shared machine drifts: read the pairs.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg

from bench import loadgen, search_store
from bench.ab import other_tree, turns
from bench.fig_reads import next_answer
from bench.fig_search import NAMES, terms
from bench.harness import cluster, metastore
from bench.scenario import parser

TRIGRAM_INDEXES = """
SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index
WHERE indexrelid::regclass::text LIKE 'readmodel.%_name_trigrams'
"""


def time_side(
    tree: Path, url: str, searches: list[tuple[str, str]], log_dir: Path
) -> tuple[dict[str, float], dict[str, bytes]]:
    """p95 ms by kind of search (and of the next pages), and every page's body by its path."""
    with metastore("api", url, log_dir, cwd=tree) as api:
        session = loadgen.Session(api.base_url)
        by_kind: dict[str, list[float]] = {}
        answers: dict[str, bytes] = {}
        try:
            paths = [("/api/v1/search?" + urllib.parse.urlencode({"q": q}), k) for k, q in searches]
            for path, _ in paths[:5]:  # warm-up
                session.get(path)
            for path, kind in paths:
                ms, status, body = session.get(path)
                assert status == 200, (path, status, body[:300])
                by_kind.setdefault(kind, []).append(ms)
                answers[path] = body
                if (found := next_answer(session, path, body)) is not None:
                    after, ms, answers[after] = found
                    by_kind.setdefault("next page", []).append(ms)
        finally:
            session.close()
        every = [ms for values in by_kind.values() for ms in values]
        figures = {
            "all": loadgen.percentile(every, 95),
            **{k: loadgen.percentile(v, 95) for k, v in sorted(by_kind.items())},
        }
        return figures, answers


def _versions(tree: Path) -> dict[str, int]:
    """The projection versions the API of the tree `tree` reads."""
    code = "import json; from metastore.api.readmodels import EXPECTED; print(json.dumps(EXPECTED))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, check=True, capture_output=True, text=True
    )
    return dict(json.loads(out.stdout))


def set_versions(conn: psycopg.Connection[Any], versions: dict[str, int]) -> None:
    """The store's projection versions set to `versions`: a tree's API reads the read
    models only at its own (another answers 503 rebuilding)."""
    for name, version in versions.items():
        conn.execute("UPDATE projection_state SET version = %s WHERE name = %s", (version, name))


def main(argv: list[str]) -> int:
    cli = parser("search", __doc__, rounds=2)
    cli.add_argument("--datasets", type=int, default=500_000)
    cli.add_argument("--jobs", type=int, default=200_000)
    cli.add_argument("--searches", type=int, default=90)
    cli.add_argument("--seed", type=int, default=20241017)
    cli.add_argument("--fields", type=int, default=0, help="fields per dataset (schemas)")
    cli.add_argument(
        "--other-has-trigrams",
        action="store_true",
        help="the other tree's DDL makes the name trigram indexes too: keep them for its turn",
    )
    cli.add_argument("--url", help="search this store as it is (no seeding, no index drops)")
    args = cli.parse_args(argv)
    with (
        other_tree(args.other) as sides,
        contextlib.ExitStack() as stack,
        tempfile.TemporaryDirectory() as log_dir,
    ):
        seeded = args.url is None
        if seeded:
            url = stack.enter_context(cluster("search", warm=False, durable=False)).database()
        else:
            url = args.url
        with psycopg.connect(url, autocommit=True) as conn:
            if seeded:
                started = time.monotonic()
                search_store.seed(conn, args.datasets, args.jobs, args.fields)
                print(
                    f"{2 * args.datasets:,} dataset names, {args.datasets * args.fields:,} "
                    f"fields, {args.jobs:,} jobs written in "
                    f"{time.monotonic() - started:.0f} s",
                    flush=True,
                )
            names = [r[0] for r in conn.execute(NAMES, {"n": args.searches * 10})]
            trigrams = conn.execute(TRIGRAM_INDEXES).fetchall() if seeded else []
            if args.other_has_trigrams:
                trigrams = []
            ours: dict[str, int] = dict(
                conn.execute("SELECT name, version FROM projection_state").fetchall()
            )
        searches = terms(names, args.searches, args.seed)
        answers: dict[str, dict[str, bytes]] = {}
        if args.fields:  # words the fields have and the names have not, in turn
            searches += [("field", search_store.FIELD_WORDS[i % 5]) for i in range(args.searches)]
        for round_, (side, tree) in turns(sides, args.rounds):
            with psycopg.connect(url, autocommit=True) as conn:
                for index, definition in trigrams:
                    if side == "other":
                        conn.execute(f"DROP INDEX IF EXISTS {index}")
                    else:
                        conn.execute(definition.replace("INDEX", "INDEX IF NOT EXISTS", 1))
                # each tree's API reads the read models as of its own projection versions
                set_versions(conn, ours if side == "this" else _versions(tree))
            result, answers[side] = time_side(tree, url, searches, Path(log_dir))
            figures = ", ".join(f"{k} {v:.1f}" for k, v in result.items())
            print(f"round {round_ + 1} {side}: p95 ms {figures}", flush=True)
        # (the pages of the last round of each: the same store, the same paths)
        differ = [p for p, body in answers["this"].items() if answers["other"].get(p) != body]
        print(f"answers: {len(answers['this']):,} pages, {len(differ)} differ", flush=True)
        for path in differ[:5]:
            print(f"  {path}", flush=True)
    return 0
