"""Every list's sort and filter on a store, SQL alone: EXPLAIN (ANALYZE, BUFFERS) of each
list statement a tree's `Listing.plan` builds (first page, next page, total), its time and
the most rows a plan node read, this checkout against another tree (issue 46).

    python -m bench.scenario list-plans --url URL [--other 2b71168] [--only /runs]

`--url`: a folded store with the names of `python -m bench.run --only log`'s workload
(namespaces `spark-prod`, `hdfs://namenode:8020`; job names with `load_t01`). Each side's
code plans the statements in a child process (the same cases, pages of 50, unrestricted),
runs them as its `Planned.read` does (the count first where a narrow page may follow; the
walk's settings for the page and total, not for a narrow page) and explains each once,
one side after the other. Prints a row a case: each side's page, next page and count, ms
and rows. `--only`: the cases whose name holds this text.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bench.ab import other_tree
from bench.harness import python_child
from bench.scenario import parser

# Run on a side's code: prints {case: {"page"|"next"|"count": [ms, rows]}} as one line.
CHILD = r'''
import datetime as dt, json, sys, uuid
import msgspec, psycopg
from metastore.access import EVERYTHING
from metastore.api import datasets, jobs, runs
from metastore.api.pagination import page

url, only = sys.argv[1], sys.argv[2]
MIDDLE = dt.datetime(2025, 9, 6, 12, 53, 5, tzinfo=dt.timezone.utc)


def cases(job):
    for sort in ("name", "latest_run", "failed_first"):
        for label, kw in [("", {}), ("ns", dict(namespace="spark-prod")),
                          ("q", dict(q="load_t01")), ("state=FAIL", dict(state=["FAIL"])),
                          ("state=COMPLETE", dict(state=["COMPLETE"])),
                          ("state=START", dict(state=["START"])),
                          ("state=FAIL,ABORT", dict(state=["FAIL", "ABORT"])),
                          ("ns+state=FAIL", dict(namespace="spark-prod", state=["FAIL"])),
                          ("late=true", dict(late=True)), ("late=false", dict(late=False)),
                          ("q+state=FAIL", dict(q="load_t01", state=["FAIL"]))]:
            yield f"/jobs sort={sort} {label}", jobs.JOBS[False], jobs.ListQuery(sort=sort, **kw)
    for sort in ("first_seen", "started", "failed_first"):
        for label, kw in [("", {}), ("ns", dict(namespace="spark-prod")),
                          ("job_id", dict(job_id=uuid.UUID(job))),
                          ("state=FAIL", dict(state=["FAIL"])),
                          ("state=COMPLETE", dict(state=["COMPLETE"])),
                          ("state=START", dict(state=["START"])),
                          ("state=FAIL,ABORT", dict(state=["FAIL", "ABORT"])),
                          ("since", dict(since=MIDDLE)), ("until", dict(until=MIDDLE)),
                          ("state=FAIL+since", dict(state=["FAIL"], since=MIDDLE))]:
            yield f"/runs sort={sort} {label}", runs.RUNS, runs.ListQuery(sort=sort, **kw)
    for label, kw in [("", {}), ("ns", dict(namespace="hdfs://namenode:8020")),
                      ("q=t01", dict(q="t01")), ("q=zzz", dict(q="zzz")),
                      ("name", dict(name="analytics-prod.layer00.t00_000001"))]:
        yield f"/datasets {label}", datasets.DATASETS, datasets.ListQuery(**kw)


def explain(conn, sql, args):
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, args).fetchone()[0][0]
    def nodes(n):
        yield n
        for c in n.get("Plans", []):
            yield from nodes(c)
    read = max((n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"]
               for n in nodes(plan["Plan"]))
    return [round(plan["Execution Time"], 2), read]


def measured(conn, listing, planned):
    """[ms, rows] of the page and count as Planned.read runs them; the page's rows."""
    out = {}
    with conn.transaction():
        if planned.settings:
            conn.execute(planned.settings.set(on=False))
        sql = planned.sql
        if planned.narrow is not None:
            if conn.execute(planned.count, planned.args).fetchone()[0] <= listing.narrow_below:
                sql = planned.narrow
                if planned.settings:
                    conn.execute(planned.settings.set(on=True))
        found = conn.execute(sql, planned.args).fetchall()
        out["page"] = explain(conn, sql, planned.args)
        out["count"] = explain(conn, planned.count, planned.args)
    return out, found


found_all = {}
with psycopg.connect(url, autocommit=True) as conn:
    conn.execute("SET jit = off")
    job = conn.execute("SELECT min(job_id::text) FROM readmodel.runs").fetchone()[0]
    for name, listing, query in cases(job):
        if only not in name:
            continue
        query = msgspec.structs.replace(query, limit=50)
        first, rows = measured(conn, listing, listing.plan(query, EVERYTHING))
        planned = listing.plan(query, EVERYTHING)
        _, cursor = page(rows, query.limit, planned.kind, planned.sort.key)
        if cursor is not None:
            nxt = msgspec.structs.replace(query, cursor=cursor)
            later, _ = measured(conn, listing, listing.plan(nxt, EVERYTHING))
            first["next"] = later["page"]
        found_all[name] = first
print(json.dumps(found_all))
'''


def main(argv: list[str]) -> int:
    cli = parser("list-plans", __doc__, rounds=None)
    cli.add_argument("--url", required=True)
    cli.add_argument("--only", default="")
    args = cli.parse_args(argv)
    measured: dict[str, dict[str, dict[str, list[float]]]] = {}
    with other_tree(args.other) as sides, tempfile.TemporaryDirectory() as tmp:
        for side, path in sides:
            log = Path(tmp) / f"{side}.log"
            measured[side] = json.loads(python_child(CHILD, [args.url, args.only], log, path))
    names = list(measured["this"])
    print(f"{'case':40s} " + " | ".join(f"{side:^56s}" for side in measured))
    for name in names:
        cells = []
        for found in measured.values():
            parts = found.get(name, {})
            cells.append(
                "  ".join(
                    f"{k} {parts[k][0]:7.1f}ms {int(parts[k][1]):6d}r"
                    for k in ("page", "next", "count")
                    if k in parts
                ).ljust(56)
            )
        print(f"{name:40s} " + " | ".join(cells), flush=True)
    return 0
