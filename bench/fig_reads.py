"""List and lookup p95 with the whole log folded: jobs, runs, datasets, exact name lookup.

Each endpoint gets the same number of requests, one at a time on one keep-alive
connection, mixing what Cockpit asks: the first page, a filtered page, and the next page
through the cursor of the previous answer.
"""

from __future__ import annotations

import random
import urllib.parse
from collections.abc import Callable, Sequence

import msgspec
import psycopg

from bench import loadgen
from bench.context import Context, p95_figures
from bench.harness import Service
from bench.report import Row, now

GROUP = "log"


class Page(msgspec.Struct):
    items: list[msgspec.Raw]
    next_cursor: str | None = None


def next_page(session: loadgen.Session, path: str, body: bytes) -> float | None:
    """The ms of the page after the one `body` answered, by its next_cursor (None: last)."""
    after = next_answer(session, path, body)
    return None if after is None else after[1]


def next_answer(
    session: loadgen.Session, path: str, body: bytes
) -> tuple[str, float, bytes] | None:
    """The path, ms and body of the page after the one `body` answered (None: last)."""
    cursor = msgspec.json.decode(body, type=Page).next_cursor
    if not cursor:
        return None
    sep = "&" if "?" in path else "?"
    after = f"{path}{sep}cursor={urllib.parse.quote(cursor)}"
    ms, status, answer = session.get(after)
    assert status == 200, (after, status, answer[:300])
    return after, ms, answer


rows = p95_figures(GROUP, ("list jobs", "list runs", "list datasets", "lookup by exact name"), 10)


def _q(path: str, **params: str) -> str:
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def _by_variant(answers: loadgen.Answers) -> str:
    """p95 of first pages, filtered first pages and next pages, as text."""
    kinds: dict[str, list[float]] = {}
    for path, ms in zip(answers.paths, answers.latencies_ms, strict=True):
        kind = "next page" if "cursor=" in path else "filtered" if "?" in path else "first page"
        kinds.setdefault(kind, []).append(ms)
    return ", ".join(
        f"{kind} {loadgen.percentile(v, 95):.2f} ms ({len(v)})" for kind, v in sorted(kinds.items())
    )


def _walk(api: Service, n: int, first: Callable[[int], str]) -> tuple[loadgen.Answers, int]:
    """n GETs on one connection: after an even one, the next page by its next_cursor;
    otherwise `first(i)`."""
    answers = loadgen.Answers([], [], [], [])
    items = 0
    path = first(0)
    session = loadgen.Session(api.base_url)
    try:
        for i in range(n):
            ms, status, body = session.get(path)
            answers.latencies_ms.append(ms)
            answers.statuses.append(status)
            answers.paths.append(path)
            page = msgspec.json.decode(body, type=Page) if status == 200 else None
            items += len(page.items) if page else 0
            if i % 2 == 0 and page is not None and page.next_cursor:
                base = path.split("&cursor=")[0].split("?cursor=")[0]
                sep = "&" if "?" in base else "?"
                path = f"{base}{sep}cursor={urllib.parse.quote(page.next_cursor)}"
            else:
                path = first(i + 1)
    finally:
        session.close()
    return answers, items


JOB_NAMESPACES = ("spark-prod", "airflow-prod")
DATASET_NAMESPACES = ("s3a://warehouse", "bigquery", "hdfs://namenode:8020")


def measure(
    ctx: Context,
    out: list[Row],
    url: str,
    api: Service,
    job_namespaces: Sequence[str] = JOB_NAMESPACES,
    dataset_namespaces: Sequence[str] = DATASET_NAMESPACES,
) -> None:
    """Lists and lookups; the filtered pages filter by `job_namespaces` (jobs) and
    `dataset_namespaces` (datasets) in turn."""
    n = ctx.sizes.read_queries
    rng = random.Random(ctx.seed + 7)
    with psycopg.connect(url) as conn:
        job_ids = [
            str(r[0]) for r in conn.execute("SELECT id FROM readmodel.jobs ORDER BY id LIMIT 5000")
        ]
        # (a sample in a random-like order, the same every run: a platform's million
        # names would not fit this process)
        names = [
            (r[0], r[1], r[2])
            for r in conn.execute(
                "SELECT namespace, name, kind FROM readmodel.dataset_names "
                "ORDER BY hashtext(namespace || '/' || name), 1, 2 LIMIT 20000"
            )
        ]
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM readmodel.jobs), (SELECT count(*) FROM readmodel.runs),"
            " (SELECT count(*) FROM readmodel.datasets), (SELECT count(*) FROM event_log)"
        ).fetchone()
    assert counts is not None
    lookups = rng.sample(names, min(n, len(names)))

    def jobs(i: int) -> str:
        return (
            _q("/api/v1/jobs")
            if i % 4 == 0
            else _q("/api/v1/jobs", namespace=job_namespaces[i % len(job_namespaces)])
        )

    def runs(i: int) -> str:
        if i % 4 == 0:
            return _q("/api/v1/runs")
        if i % 4 == 2:
            return _q("/api/v1/runs", state="FAIL")
        return _q("/api/v1/runs", job_id=rng.choice(job_ids))

    def datasets(i: int) -> str:
        return (
            _q("/api/v1/datasets")
            if i % 4 == 0
            else _q("/api/v1/datasets", namespace=dataset_namespaces[i % len(dataset_namespaces)])
        )

    walkers = {"list jobs": jobs, "list runs": runs, "list datasets": datasets}
    for row in out[:3]:
        what = row.figure.rsplit(" p95", 1)[0]
        loadgen.get_many(api.base_url, [walkers[what](i) for i in range(5)])  # warm-up
        answers, items = _walk(api, n, walkers[what])
        bad = sum(1 for s in answers.statuses if s != 200)
        split = _by_variant(answers)
        row.record(
            loadgen.percentile(answers.latencies_ms, 95),
            f"{n} requests (first pages, filtered pages, next pages by cursor; "
            f"default page size), {items / max(1, n):.0f} items per answer, {bad} not "
            f"200, p50 {loadgen.percentile(answers.latencies_ms, 50):.2f} ms, p95 by kind: "
            f"{split}; over "
            f"{counts[0]:,} jobs, {counts[1]:,} runs, {counts[2]:,} datasets from "
            f"{counts[3]:,} events.",
        )
    lookup = out[3]
    paths = [_q("/api/v1/datasets", namespace=ns, name=name) for ns, name, _ in lookups]
    answers = loadgen.timed(api.base_url, paths, warm_up=5)
    found = sum(1 for page in loadgen.decoded(answers, Page) if page.items)
    lookup.value = loadgen.percentile(answers.latencies_ms, 95)
    symlinks = sum(1 for _, _, kind in lookups if kind != "emitted")
    lookup.note = (
        f"`GET /api/v1/datasets?namespace=&name=` for {len(paths)} random dataset "
        f"names ({symlinks} of them symlink names), {found} found; p50 "
        f"{loadgen.percentile(answers.latencies_ms, 50):.2f} ms."
    )
    for row in out:
        row.measured_at = now()
