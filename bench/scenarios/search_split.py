"""Where a search's time goes, statement by statement, on the store of `make bench`'s search
group (bench/fig_find.py: 100,000 datasets of two names and four fields, 50,000 jobs).

    python -m bench.scenario search-split [--searches 60] [--datasets 100000]

`metastore api` serves the store; the searches Cockpit's box sends (bench/fig_search.terms:
a whole name, its first 8 characters, a word) and the field words (search_store.FIELD_WORDS)
are sent once to warm up, then one at a time, with the server logging every statement's duration
(log_min_duration_statement = 0). Printed per group: the request's time at the client and
the statements' sum at the server (the rest is HTTP, Python and round trips), then each
kind of statement's mean and p95 per request, then each kind of search's means. For the
plans, run a statement of the log under EXPLAIN (ANALYZE, BUFFERS).
"""

from __future__ import annotations

import collections
import re
import statistics
import time
import urllib.parse
from pathlib import Path

import psycopg

from bench import loadgen, search_store
from bench.fig_search import NAMES, terms
from bench.harness import cluster, metastore
from bench.scenario import parser

STATEMENT = re.compile(
    r"duration: ([\d.]+) ms\s+(?:statement|execute [^:]*|bind [^:]*|parse [^:]*): (.*?)(?=\n\S|\Z)",
    re.S,
)
# (a test on a statement's text, its kind), the first that holds
KINDS = [
    (lambda s: "set_config" in s, "plan settings"),
    (lambda s: "MATERIALIZED" in s, "name counts (to 10,000, trigram)"),
    (lambda s: "2 AS rank" in s and "~<=~" in s, "name substring page, to the count's bound"),
    (lambda s: "2 AS rank" in s, "name substring page, unbounded"),
    (lambda s: "0 AS rank" in s, "name exact and prefix pages (name index)"),
    (lambda s: f"LIMIT {1_001}" in s, "field count (to 1,000, trigram)"),
    (lambda s: "unnest" in s, "field hits' display names"),
    (lambda s: "f.low, 6" in s, "field page: description alone"),
    (lambda s: "f.low, 5" in s, "field page: containing"),
    (lambda s: "f.low, 3" in s or "f.low, 4" in s, "field page: exact and prefix"),
]


def kind(sql: str) -> str:
    return next((name for test, name in KINDS if test(sql)), "other (transaction, position)")


def p95(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(0.95 * len(values)))]


def report(title: str, requests: list[tuple[str, float, list[tuple[float, str]]]]) -> None:
    client = [ms for _, ms, _ in requests]
    server = [sum(d for d, _ in s) for _, _, s in requests]
    print(
        f"{title}: {len(requests)} requests; client p50 {statistics.median(client):.1f} "
        f"p95 {p95(client):.1f} ms; statements' sum p50 {statistics.median(server):.1f} "
        f"p95 {p95(server):.1f} ms"
    )
    per: dict[str, list[float]] = collections.defaultdict(list)
    for _, _, statements in requests:
        summed: dict[str, float] = collections.defaultdict(float)
        for duration, sql in statements:
            summed[kind(sql)] += duration
        for k, total in summed.items():
            per[k].append(total)
    for k, values in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        print(
            f"  {k:48s} in {len(values):3d}: mean {statistics.mean(values):6.2f}  "
            f"p95 {p95(values):6.2f} ms"
        )
    by: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for (what, ms, _), s in zip(requests, server, strict=True):
        by[what].append((ms, s))
    for what, pairs in sorted(by.items()):
        print(
            f"  {what:24s} client mean {statistics.mean(a for a, _ in pairs):6.1f}, "
            f"statements {statistics.mean(b for _, b in pairs):6.1f} ms"
        )


def main(argv: list[str]) -> int:
    cli = parser("search-split", __doc__, other=False, rounds=None)
    cli.add_argument("--datasets", type=int, default=100_000)
    cli.add_argument("--searches", type=int, default=60)
    args = cli.parse_args(argv)
    with cluster("search-split", warm=False, durable=False) as pg:
        url = pg.database()
        with psycopg.connect(url, autocommit=True) as conn:
            search_store.seed(conn, args.datasets, args.datasets // 2, 4)
            # (settled, as a store serving for a while is: measured right after the writes,
            # autovacuum ran beside the searches and doubled some of them)
            conn.execute("VACUUM")
            # (drawn as fig_find draws its 150: the first searches are the same ones)
            names = [r[0] for r in conn.execute(NAMES, {"n": 1_500})]
            conn.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
            conn.execute("SELECT pg_reload_conf()")
        sent = [(f"name: {k}", q) for k, q in terms(names, args.searches, 11)]
        words = search_store.FIELD_WORDS
        sent += [(f"field: {words[i % 5]}", words[i % 5]) for i in range(args.searches)]
        log = Path(pg.pg.logfile)
        timed: list[tuple[str, float, list[tuple[float, str]]]] = []
        with metastore("api", url, Path(pg.dir)) as api:
            session = loadgen.Session(api.base_url)
            try:
                for _, q in sent:  # (a fresh store's first reads set hint bits)
                    session.get("/api/v1/search?" + urllib.parse.urlencode({"q": q}))
                for what, q in sent:
                    start = log.stat().st_size
                    ms, status, _ = session.get(
                        "/api/v1/search?" + urllib.parse.urlencode({"q": q})
                    )
                    assert status == 200, (q, status)
                    time.sleep(0.05)  # (the server's log written)
                    with log.open() as f:
                        f.seek(start)
                        found = STATEMENT.findall(f.read())
                    timed.append((what, ms, [(float(d), " ".join(s.split())) for d, s in found]))
            finally:
                session.close()
    for group in ("name", "field"):
        report(f"search by {group}", [t for t in timed if t[0].startswith(group)])
    return 0
