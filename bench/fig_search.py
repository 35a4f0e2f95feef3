"""Search p95: `GET /api/v1/search?q=` for names as Cockpit's search box sends them.

A third each: a whole table name (an exact hit), its first eight characters (a prefix),
a word of the names' vocabulary (a substring that matches many), drawn at random (seed)
from the dataset names and jobs in the read models. One request at a time on one
keep-alive connection, the first page (default size).
"""

from __future__ import annotations

import random

import psycopg

from bench import loadgen
from bench.context import Context
from bench.fig_reads import Page, _q
from bench.harness import Service
from bench.report import Row, now

# A sample of names in an order that is random-like and the same in every run.
NAMES = """
(SELECT name FROM readmodel.dataset_names ORDER BY hashtext(name) LIMIT %(n)s)
UNION ALL (SELECT name FROM readmodel.jobs ORDER BY hashtext(name) LIMIT %(n)s)
"""


def rows(command: str) -> list[Row]:
    return [Row("search p95, ms", "ms", command=command, client=loadgen.ASYNCIO_CLIENT)]


def terms(names: list[str], n: int, seed: int) -> list[tuple[str, str]]:
    """(kind, q) for n searches drawn from `names`: exact, prefix and word in turn."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for i in range(n):
        name = rng.choice(names)
        last = name.replace("/", ".").rsplit(".", 1)[-1] or name
        if i % 3 == 0:
            out.append(("exact", name))
        elif i % 3 == 1:
            out.append(("prefix", last[:8]))
        else:
            words = [w for w in last.split("_") if len(w) >= 3 and not w.isdigit()]
            out.append(("word", rng.choice(words) if words else last[:4]))
    return out


def measure(ctx: Context, out: list[Row], url: str, api: Service, n: int) -> None:
    (row,) = out
    with psycopg.connect(url) as conn:
        names = [r[0] for r in conn.execute(NAMES, {"n": max(1000, n * 10)})]
    searches = terms(names, n, ctx.seed + 11)
    paths = [_q("/api/v1/search", q=q) for _, q in searches]
    answers = loadgen.timed(api.base_url, paths, warm_up=5)
    bad = sum(1 for s in answers.statuses if s != 200)
    hits = [len(page.items) for page in loadgen.decoded(answers, Page)]
    kinds: dict[str, list[float]] = {}
    for (kind, _), ms in zip(searches, answers.latencies_ms, strict=True):
        kinds.setdefault(kind, []).append(ms)
    split = ", ".join(f"{k} {loadgen.percentile(v, 95):.2f} ms" for k, v in sorted(kinds.items()))
    row.value = loadgen.percentile(answers.latencies_ms, 95)
    row.measured_at = now()
    row.note = (
        f"{len(paths)} searches (a whole name, its first 8 characters, a word of it, in "
        f"turn; names drawn at random (seed) from a sample of {len(names):,} dataset and "
        f"job names), one at a time after 5 warm-ups; {bad} not 200; "
        f"{sum(hits) / max(1, len(hits)):.0f} hits per answer (first page); p50 "
        f"{loadgen.percentile(answers.latencies_ms, 50):.2f} ms; p95 by kind: {split}."
    )
