"""Times GET /api/v1/search of this checkout against another source tree's, A/B, on a store
of many names.

    .venv/bin/python scripts/time_search.py --other SRC [--datasets 500000] [--jobs 200000]
    .venv/bin/python scripts/time_search.py --other SRC --url URL   # a store there is

Writes `--datasets` datasets (two names each) and `--jobs` jobs straight into the read
models (bench/search_store.py) of a throwaway PostgreSQL, then serves them with `metastore
api` from each tree in turns and times the searches Cockpit's search box sends (a whole
name, its first eight characters, a word of it: bench/fig_search.py), each first page and
the next. The other tree is timed on the indexes its own DDL makes: this checkout's
trigram indexes are dropped for its turn. `--other` is a source tree (e.g. `git archive
main | tar -x -C /tmp/main-src`). With `--url`, the store there is (say, one `make
bench-scale SCALE_ARGS=--keep` left) is searched as it is, its indexes untouched: for a
tree whose DDL has the trigram indexes too. A shared machine drifts: read the pairs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import msgspec
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import loadgen, search_store  # noqa: E402
from bench.fig_reads import Page  # noqa: E402
from bench.fig_search import NAMES, terms  # noqa: E402
from bench.harness import free_port, service_env, start_service  # noqa: E402
from metastore.embedded_pg import EmbeddedPostgres  # noqa: E402
from metastore.migrations import apply_migrations  # noqa: E402
from projections.schema import create_readmodel_tables  # noqa: E402

TRIGRAM_INDEXES = """
SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index
WHERE indexrelid::regclass::text LIKE 'readmodel.%_name_trigrams'
"""


def time_side(src: Path, url: str, searches: list[tuple[str, str]], log_dir: Path) -> dict:
    port = free_port()
    api = start_service(["-m", "metastore", "api"], service_env(url, port), port, log_dir, cwd=src)
    try:
        session = loadgen.Session(api.base_url)
        by_kind: dict[str, list[float]] = {}
        try:
            paths = [("/api/v1/search?" + urllib.parse.urlencode({"q": q}), k) for k, q in searches]
            for path, _ in paths[:5]:  # warm-up
                session.get(path)
            for path, kind in paths:
                ms, status, body = session.get(path)
                assert status == 200, (path, status, body[:300])
                by_kind.setdefault(kind, []).append(ms)
                cursor = msgspec.json.decode(body, type=Page).next_cursor
                if cursor:
                    ms, status, body = session.get(f"{path}&cursor={urllib.parse.quote(cursor)}")
                    assert status == 200, (path, status, body[:300])
                    by_kind.setdefault("next page", []).append(ms)
        finally:
            session.close()
        every = [ms for values in by_kind.values() for ms in values]
        return {
            "all": loadgen.percentile(every, 95),
            **{k: loadgen.percentile(v, 95) for k, v in sorted(by_kind.items())},
        }
    finally:
        api.stop()


def _versions(src: Path) -> dict[str, int]:
    """The projection versions the API of the tree `src` reads."""
    code = "import json; from metastore.api.readmodels import EXPECTED; print(json.dumps(EXPECTED))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=src, check=True, capture_output=True, text=True
    )
    return dict(json.loads(out.stdout))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", type=Path, required=True, help="the source tree to compare")
    parser.add_argument("--datasets", type=int, default=500_000)
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--searches", type=int, default=90)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20241017)
    parser.add_argument("--fields", type=int, default=0, help="fields per dataset (schemas)")
    parser.add_argument(
        "--other-has-trigrams",
        action="store_true",
        help="the other tree's DDL makes the name trigram indexes too: keep them for its turn",
    )
    parser.add_argument("--url", help="search this store as it is (no seeding, no index drops)")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="time-search-", dir="/tmp"))
    pg = None if args.url else EmbeddedPostgres(data, fast_unsafe=True)
    url = pg.start() if pg is not None else args.url
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            if pg is not None:
                apply_migrations(url)
                create_readmodel_tables(conn)
                started = time.monotonic()
                search_store.seed(conn, args.datasets, args.jobs, args.fields)
                print(
                    f"{2 * args.datasets:,} dataset names, {args.datasets * args.fields:,} "
                    f"fields, {args.jobs:,} jobs written in "
                    f"{time.monotonic() - started:.0f} s",
                    flush=True,
                )
            names = [r[0] for r in conn.execute(NAMES, {"n": args.searches * 10})]
            trigrams = conn.execute(TRIGRAM_INDEXES).fetchall() if pg is not None else []
            if args.other_has_trigrams:
                trigrams = []
            ours = dict(conn.execute("SELECT name, version FROM projection_state").fetchall())
        searches = terms(names, args.searches, args.seed)
        if args.fields:  # words the fields have and the names have not, in turn
            searches += [("field", search_store.FIELD_WORDS[i % 5]) for i in range(args.searches)]
        for round_ in range(args.rounds):
            order = [("this", ROOT), ("other", args.other.resolve())]
            for side, src in order if round_ % 2 == 0 else order[::-1]:
                with psycopg.connect(url, autocommit=True) as conn:
                    for index, definition in trigrams:
                        if side == "other":
                            conn.execute(f"DROP INDEX IF EXISTS {index}")
                        else:
                            conn.execute(definition.replace("INDEX", "INDEX IF NOT EXISTS", 1))
                    # each tree's API reads the read models as of its own projection versions
                    versions = ours if side == "this" else _versions(src)
                    for name, version in versions.items():
                        conn.execute(
                            "UPDATE projection_state SET version = %s WHERE name = %s",
                            (version, name),
                        )
                result = time_side(src, url, searches, data)
                figures = ", ".join(f"{k} {v:.1f}" for k, v in result.items())
                print(f"round {round_ + 1} {side}: p95 ms {figures}", flush=True)
    finally:
        if pg is not None:
            pg.stop()


if __name__ == "__main__":
    main()
