"""The API's reads as of T: their time and the server's planning, two trees' APIs in turns.

    python -m bench.scenario read-planning --other REV [--events 10000] [--past-months 0]
        [--rounds 2]

Folds `--events` events of the benchmark workload (bench/datagen.py, 20,000 nodes) into a
throwaway PostgreSQL with pg_stat_statements (planning tracked), the log with
`--past-months` empty monthly partitions before the current one (a store that old, as far
as planning goes), then times 300 reads of each kind with each tree's `metastore api` in
turns (one keep-alive connection, after 10 warm-ups): the lineage graph from a job and from
a dataset as of the middle of the log's event times (as make bench's, about half of them
404: first seen later), a job's and a dataset's page as of then, and the lineage from a job
now. Prints p50 / p95 ms, how many answered 200, and the server's executing and planning
time per kind (warm-ups included).
"""

from __future__ import annotations

import tempfile
import urllib.parse
from pathlib import Path

import psycopg

from bench import datagen, loadgen
from bench.ab import other_tree, turns
from bench.harness import metastore
from bench.scenario import parser
from bench.scenarios.live_fold import WITH_STATEMENTS, past_partitions
from metastore.catalogs import NO_CATALOGS
from metastore.embedded_pg import EmbeddedPostgres
from metastore.eventlog import append_events
from metastore.migrations import apply_migrations
from projections.replay import prepare_tables
from projections.runner import catch_up

exec(WITH_STATEMENTS)  # (the server with pg_stat_statements)
SPENT = """SELECT round(sum(total_exec_time)), round(sum(total_plan_time)) FROM pg_stat_statements
WHERE query NOT LIKE '%%pg_stat_statements%%'"""


def store(url: str, events: int, past_months: int) -> None:
    apply_migrations(url)
    prepare_tables(url, NO_CATALOGS)
    with psycopg.connect(url, autocommit=True) as conn:
        past_partitions(conn, past_months)
        records = [datagen.to_record(b) for b in datagen.events(20_000, events, 20241017)]
        for start in range(0, len(records), 500):
            append_events(conn, records[start : start + 500])
    catch_up(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on")
        conn.execute("SELECT pg_reload_conf()")


def reads(url: str) -> dict[str, list[str]]:
    with psycopg.connect(url) as conn:
        jobs = [r[0] for r in conn.execute("SELECT id FROM readmodel.jobs ORDER BY id LIMIT 300")]
        datasets = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM readmodel.datasets WHERE merged_into IS NULL ORDER BY id LIMIT 300"
            )
        ]
        (middle,) = conn.execute(
            "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY event_time) FROM event_log"
        ).fetchone() or (None,)
    at = "&as_of=" + urllib.parse.quote(middle.isoformat())
    lineage = "/api/v1/lineage?depth=2&direction=both&node="
    return {
        "lineage from a job as of T": [f"{lineage}job:{j}{at}" for j in jobs],
        "lineage from a dataset as of T": [f"{lineage}dataset:{d}{at}" for d in datasets],
        "a job as of T": [f"/api/v1/jobs/{j}?{at[1:]}" for j in jobs],
        "a dataset as of T": [f"/api/v1/datasets/{d}?{at[1:]}" for d in datasets],
        "lineage from a job now": [f"{lineage}job:{j}" for j in jobs],
    }


def main(argv: list[str]) -> int:
    cli = parser("read-planning", __doc__, rounds=2)
    cli.add_argument("--events", type=int, default=10_000)
    cli.add_argument("--past-months", type=int, default=0)
    args = cli.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="read-planning-", dir="/tmp"))
    pg = EmbeddedPostgres(folder, fast_unsafe=True)
    url = pg.start()
    try:
        store(url, args.events, args.past_months)
        kinds = reads(url)
        with other_tree(args.other) as sides:
            for round_, (name, tree) in turns(sides, args.rounds):
                print(f"round {round_ + 1} {name} ({tree}):", flush=True)
                with metastore("api", url, folder, cwd=tree) as api:
                    for kind, paths in kinds.items():
                        with psycopg.connect(url, autocommit=True) as conn:
                            conn.execute("SELECT pg_stat_statements_reset()")
                        answers = loadgen.timed(api.base_url, paths)
                        with psycopg.connect(url) as conn:
                            executing, planning = conn.execute(SPENT).fetchone() or (0, 0)
                        ms = answers.latencies_ms
                        found = sum(1 for status in answers.statuses if status == 200)
                        print(
                            f"  {kind:<31} p50 {loadgen.percentile(ms, 50):6.2f} ms, p95 "
                            f"{loadgen.percentile(ms, 95):6.2f} ms, {found} of {len(paths)} "
                            f"200; the server executing {executing} ms, planning {planning} ms",
                            flush=True,
                        )
    finally:
        pg.destroy()
    return 0
