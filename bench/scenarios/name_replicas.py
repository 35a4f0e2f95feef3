"""Name-bound reads at K times a kept scale store's names: /datasets pages and /search, this
checkout against another tree, without loading K times the events.

    python -m bench.run --scale --keep --max-events 1000000    # prints the store's URL
    python -m bench.scenario name-replicas URL --times 5 --other TREE [--rounds 2]

Copies the name read models of the store at URL (namespaces, datasets, dataset_names,
jobs, dataset_fields: the scale corpus's vocabulary and name layout) into two databases of
a throwaway PostgreSQL: `x1`, as they are, and `xK`, with K - 1 replicas of every dataset
and job beside the originals (new ids, `_r<k>` appended to each name, so a replica sorts
next to its original and a word is in the same share of names), vacuumed and analyzed.
Then serves each database with each tree's API in turns (each tree's projection versions
set, as bench/scenarios/search.py does) and times, one request at a time: the first page
of /datasets, the three pages after it, and the searches make bench sends (a whole name,
its first 8 characters, a word of it: bench/fig_search.py). The other read models are
empty: a page's freshness, lineage and runs are not measured here (scale-requery on the
kept store does). Prints p50 / p95 ms by read, database and side.
"""

from __future__ import annotations

import statistics
import tempfile
import urllib.parse
from pathlib import Path

import msgspec
import psycopg

from bench import loadgen
from bench.ab import other_tree, turns
from bench.fig_reads import Page
from bench.fig_search import NAMES, terms
from bench.harness import cluster, metastore
from bench.scenario import parser
from bench.scenarios.search import _versions, set_versions

TABLES = ("namespaces", "datasets", "dataset_names", "jobs", "dataset_fields")
# The key column each replica's id is derived from, and the name columns it suffixes.
IDS = {
    "datasets": "id",
    "dataset_names": "dataset_id",
    "jobs": "id",
    "dataset_fields": "dataset_id",
}
NAMES_OF = {"datasets": ("name", "home_name"), "dataset_names": ("name",), "jobs": ("name",)}
PAGES_AFTER = 3


def _copy(source: str, target: str) -> None:
    with psycopg.connect(source) as src, psycopg.connect(target) as dst:
        for table in TABLES:
            out_sql = f"COPY readmodel.{table} TO STDOUT (FORMAT BINARY)"
            in_sql = f"COPY readmodel.{table} FROM STDIN (FORMAT BINARY)"
            with src.cursor().copy(out_sql) as out, dst.cursor().copy(in_sql) as into:
                for chunk in out:
                    into.write(chunk)


def _replicate(url: str, times: int) -> None:
    """`times - 1` replicas of each dataset, its names and fields, and each job (vacuumed
    and analyzed by the caller, as the copy is)."""
    with psycopg.connect(url) as conn:
        for table, key in IDS.items():
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = 'readmodel' AND table_name = %s"
                    " ORDER BY ordinal_position",
                    (table,),
                )
            ]
            made = [
                f"md5({c}::text || k)::uuid"
                if c == key
                else f"{c} || '_r' || k"
                if c in NAMES_OF.get(table, ())
                else c
                for c in columns
            ]
            conn.execute(
                f"INSERT INTO readmodel.{table} ({', '.join(columns)})"
                f" SELECT {', '.join(made)} FROM readmodel.{table},"
                f" generate_series(1, {times - 1}) k"
            )
            conn.commit()


def _time(base_url: str, searches: list[tuple[str, str]]) -> dict[str, list[float]]:
    session = loadgen.Session(base_url)
    by_read: dict[str, list[float]] = {"datasets first": [], "datasets next": [], "search": []}
    try:
        for _ in range(5):  # warm-up
            session.get("/api/v1/datasets")
        for _, q in searches:
            ms, status, body = session.get("/api/v1/search?" + urllib.parse.urlencode({"q": q}))
            assert status == 200, (q, status, body[:300])
            by_read["search"].append(ms)
        for _ in range(25):
            ms, status, body = session.get("/api/v1/datasets")
            assert status == 200, body[:300]
            by_read["datasets first"].append(ms)
            cursor = msgspec.json.decode(body, type=Page).next_cursor
            for _ in range(PAGES_AFTER):
                path = "/api/v1/datasets?" + urllib.parse.urlencode({"cursor": cursor})
                ms, status, body = session.get(path)
                assert status == 200, body[:300]
                by_read["datasets next"].append(ms)
                cursor = msgspec.json.decode(body, type=Page).next_cursor
    finally:
        session.close()
    return by_read


def main(argv: list[str]) -> int:
    cli = parser("name-replicas", __doc__, rounds=2)
    cli.add_argument("url", help="a kept scale store (make bench-scale SCALE_ARGS=--keep)")
    cli.add_argument("--times", type=int, default=5, help="K: the names of the second copy")
    cli.add_argument("--searches", type=int, default=150)
    cli.add_argument("--seed", type=int, default=20241017)
    args = cli.parse_args(argv)
    with (
        other_tree(args.other) as sides,
        cluster("replicas", warm=False, durable=False) as pg,
        tempfile.TemporaryDirectory() as log_dir,
    ):
        stores = {}
        for label, times in (("x1", 1), (f"x{args.times}", args.times)):
            stores[label] = pg.database()
            _copy(args.url, stores[label])
            if times > 1:
                _replicate(stores[label], times)
            with psycopg.connect(stores[label], autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
                count = conn.execute("SELECT count(*) FROM readmodel.dataset_names").fetchone()
                names = [r[0] for r in conn.execute(NAMES, {"n": args.searches * 10})]
            print(f"{label}: {count[0] if count else 0:,} dataset names", flush=True)
        searches = terms(names, args.searches, args.seed)
        for round_, (side, tree) in turns(sides, args.rounds):
            versions = _versions(tree)
            for label, url in stores.items():
                with psycopg.connect(url, autocommit=True) as conn:
                    set_versions(conn, versions)
                with metastore("api", url, Path(log_dir), cwd=tree) as api:
                    by_read = _time(api.base_url, searches)
                figures = ", ".join(
                    f"{read} {statistics.median(v):.1f} / {loadgen.percentile(v, 95):.1f}"
                    for read, v in by_read.items()
                )
                print(f"round {round_ + 1} {side} {label}: p50 / p95 ms {figures}", flush=True)
    return 0
