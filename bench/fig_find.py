"""Search by name and by field on a store of many names and fields, and cheap polling.

A store of datasets (two names and FIELDS fields each) and jobs is written straight into the
read models (bench/search_store.py) of a throwaway PostgreSQL, served by `metastore api`:

- search by name: what Cockpit's search box sends (a whole name, its first eight characters,
  a word of it: bench/fig_search.py), the first page;
- search by field: words the fields have and the names have not (search_store.FIELD_WORDS:
  a quarter of the fields, a tenth, a description's word, a whole field name, one field);
- a 304: each of those searches again with the ETag of its answer (an unchanged answer);
- the change check: GET /api/v1/changes?since=<the position>.

One request at a time on one keep-alive connection, after 5 warm-ups, on a settled store:
VACUUM ANALYZE after the writes, as autovacuum does within seconds of them. Measured right
after the writes, autovacuum ran on all four tables beside the first searches and tripled
the whole names' (docs/PERFORMANCE.md, "Search's page probed along the name index"): a
transient a store serving for a while does not see, which inflated the figures before.

    python -m bench.run --only search
    python -m bench.scenario search --other SRC --fields 4   # A/B against another tree
"""

from __future__ import annotations

import urllib.parse

import msgspec
import psycopg

from bench import loadgen, search_store
from bench.context import Context, p95_figures
from bench.fig_search import NAMES, terms
from bench.harness import cluster, metastore
from bench.report import Row, now

GROUP = "search"
TARGET_MS = 25
FIELDS = 4
FIGURES = (
    "search by name",
    "search by field",
    "an unchanged search's 304",
    "the change check (/changes?since=)",
)


rows = p95_figures(GROUP, FIGURES, TARGET_MS)


def _q(q: str) -> str:
    return "/api/v1/search?" + urllib.parse.urlencode({"q": q})


def measure(ctx: Context, out: list[Row]) -> None:
    datasets = 2_000 if ctx.quick else 100_000
    jobs = datasets // 2
    searches = 30 if ctx.quick else 150
    with cluster(GROUP, wal_segments=4 if ctx.quick else 16) as pg:
        url = pg.database()
        with psycopg.connect(url, autocommit=True) as conn:
            search_store.seed(conn, datasets, jobs, FIELDS)
            conn.execute("VACUUM ANALYZE")  # (settled: see above)
            names = [r[0] for r in conn.execute(NAMES, {"n": searches * 10})]
        by_name = [_q(q) for _, q in terms(names, searches, ctx.seed + 11)]
        by_field = [_q(search_store.FIELD_WORDS[i % 5]) for i in range(searches)]
        with metastore("api", url, ctx.log_dir) as api:
            session = loadgen.Session(api.base_url)
            try:
                figures = _time(session, by_name, by_field, searches)
            finally:
                session.close()
    size = (
        f"{2 * datasets:,} dataset names, {datasets * FIELDS:,} fields, {jobs:,} jobs "
        "written into the read models (bench/search_store.py)"
    )
    for row, (latencies, note) in zip(out, figures, strict=True):
        row.value = loadgen.percentile(latencies, 95)
        row.measured_at = now()
        row.note = (
            f"{note}; {len(latencies)} requests one at a time after 5 warm-ups; p50 "
            f"{loadgen.percentile(latencies, 50):.2f} ms; {size}, VACUUM ANALYZEd (settled)."
        )


def _time(
    session: loadgen.Session, by_name: list[str], by_field: list[str], n: int
) -> list[tuple[list[float], str]]:
    for path in by_name[:5]:
        session.get(path)
    figures = []
    tags: dict[str, str] = {}
    for paths, what in ((by_name, "a whole name, a prefix, a word"), (by_field, "field words")):
        latencies = []
        for path in paths:
            ms, status, _ = session.get(path)
            assert status == 200, (path, status)
            tags[path] = session.etag
            latencies.append(ms)
        figures.append((latencies, what))
    unchanged = []
    for path in [*by_name, *by_field]:
        ms, status, _ = session.get(path, if_none_match=tags[path])
        assert status == 304, (path, status)
        unchanged.append(ms)
    figures.append((unchanged, "each search above again with its answer's ETag: all 304"))
    _, status, body = session.get("/api/v1/changes")
    assert status == 200, body
    since = msgspec.json.decode(body)["position"]
    checks = []
    for _ in range(n):
        ms, status, body = session.get(f"/api/v1/changes?since={since}")
        assert status == 200 and msgspec.json.decode(body)["changed"] is False, body
        checks.append(ms)
    figures.append((checks, "nothing ingested meanwhile: changed false"))
    return figures
