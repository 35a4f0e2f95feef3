"""Times the projector's own batch (two connections, pipelines) on a growing store, A/B.

    python -m bench.scenario live-batches --events 30000 --limit 300 --rounds 2 [--other SRC]
        [--streaming RUNNING] [--past-months N]

Each run (a child process per source tree, in turns) starts a throwaway PostgreSQL with
pg_stat_statements, appends `--events` events of the lag benchmark's workload (the seed of
bench/fig_lag.py) in transactions of 50 as ingest's group commit does, analyzes the still
empty read models (a fresh store's statistics, as the lag benchmark's), then folds them
with `fold_live_batch` in batches of `--limit`, as the projector does between NOTIFYs at
1,000 events/s. Prints the fold rate, the batches' time percentiles, the process's CPU
seconds and the statements that took the most server time (executing and planning). SRC is
a source tree or a commit (bench/ab.py). `--streaming N`: a streaming run (Flink reports
RUNNING every minute) has N RUNNING events in the log before the workload and one more
every 50 of its events, so each batch folds one of its events, as the projector does while
such a job runs.
`--past-months N`: the log has N monthly partitions before the current one (empty: what
they cost is planning the statements that read the log, not their rows).
"""

from __future__ import annotations

from bench.scenarios.live_fold import PAST_PARTITIONS, WITH_STATEMENTS, in_turns, live_parser

CHILD = (
    r'''
import sys, tempfile, time
from pathlib import Path
import psycopg
from bench import datagen
from metastore.catalogs import NO_CATALOGS
from metastore.embedded_pg import EmbeddedPostgres
from metastore.eventlog import append_events
from metastore.migrations import apply_migrations
from projections.fold import collector_for_batches, tune_session
from projections.replay import prepare_tables
from projections.runner import fold_live_batch
from projections.schema import adopt_rules

EVENTS, LIMIT, SEED = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
STREAMING, PAST_MONTHS = int(sys.argv[4]), int(sys.argv[5])
STATEMENTS = """
SELECT round(total_exec_time::numeric), round(total_plan_time::numeric), calls, rows,
       left(regexp_replace(query, '\s+', ' ', 'g'), 110)
FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 12
"""
TOTALS = """SELECT round(sum(total_exec_time)), round(sum(total_plan_time))
FROM pg_stat_statements"""
'''
    + WITH_STATEMENTS
    + PAST_PARTITIONS
    + r"""folder = Path(tempfile.mkdtemp(prefix="live-batches-", dir="/tmp"))
pg = EmbeddedPostgres(folder, fast_unsafe=True)
url = pg.start()
try:
    apply_migrations(url)
    prepare_tables(url, NO_CATALOGS)
    with psycopg.connect(url, autocommit=True) as conn:  # (a log that has run for months)
        past_partitions(conn, PAST_MONTHS)
    records = [datagen.to_record(b) for b in datagen.events(100_000, EVENTS, SEED + 3)]
    if STREAMING:
        import datetime as dt, uuid
        from tests.logdata import log_record
        from tests.support import run_event
        run, job = str(uuid.uuid4()), ("flink", "clicks_by_minute")
        start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        def running(i):
            when = (start + dt.timedelta(minutes=i)).isoformat().replace("+00:00", "Z")
            return log_record(run_event("RUNNING", when, "https://flink", job, run, [], []))
        streaming = [log_record(run_event("START", "2026-01-01T00:00:00Z", "https://flink",
                                          job, run, [], []))]
        streaming += [running(i) for i in range(STREAMING)]
        mixed = []
        for i in range(0, len(records), 49):
            mixed += records[i : i + 49] + [running(STREAMING + i)]
        records = streaming + mixed
    PREFIX = 1 + STREAMING if STREAMING else 0  # (its START and RUNNING events so far)
    with psycopg.connect(url, autocommit=True) as conn:
        for start in range(0, len(records), 50):
            append_events(conn, records[start : start + 50])
        conn.execute("VACUUM ANALYZE")
        conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute("SELECT pg_stat_statements_reset()")
    times = []
    with psycopg.connect(url) as conn, psycopg.connect(url) as side:
        tune_session(conn)
        tune_session(side)
        with conn.transaction():
            adopt_rules(conn, NO_CATALOGS)
        done = 0
        with collector_for_batches():
            while done < PREFIX:  # (the streaming run's past, folded untimed)
                done += fold_live_batch(conn, limit=min(2000, PREFIX - done), side=side).read
        if PREFIX:
            with psycopg.connect(url, autocommit=True) as reset:
                reset.execute("SELECT pg_stat_statements_reset()")
        started, cpu = time.perf_counter(), time.process_time()
        with collector_for_batches():
            while True:
                at = time.perf_counter()
                result = fold_live_batch(conn, limit=LIMIT, side=side)
                times.append((time.perf_counter() - at) * 1000)
                done += result.read
                if not result.full:
                    break
        done -= PREFIX
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    times.sort()
    at = lambda q: times[min(len(times) - 1, int(len(times) * q))]
    print(f"  {done:,} events in {len(times)} batches, {elapsed:.1f} s, {done / elapsed:,.0f} "
          f"events/s; this process's CPU {cpu:.1f} s")
    print(f"  batch ms: p50 {at(0.5):.0f}, p90 {at(0.9):.0f}, p99 {at(0.99):.0f}, "
          f"max {times[-1]:.0f}")
    with psycopg.connect(url) as conn:
        spent = conn.execute(TOTALS).fetchone()
        print("  the server's statements: executing %s ms, planning %s ms" % spent)
        print("  statements (executing ms, planning ms, calls, rows, text):")
        for row in conn.execute(STATEMENTS):
            print("    ", *row)
finally:
    pg.destroy()
"""
)


def main(argv: list[str]) -> int:
    cli = live_parser("live-batches", __doc__, 30_000, 300)
    cli.add_argument("--seed", type=int, default=20241017)
    cli.add_argument("--streaming", type=int, default=0, help="a streaming run's RUNNING events")
    cli.add_argument(
        "--past-months", type=int, default=0, help="empty monthly log partitions before this one"
    )
    args = cli.parse_args(argv)
    child_args = [str(args.events), str(args.limit), str(args.seed), str(args.streaming)]
    child_args.append(str(args.past_months))
    in_turns(CHILD, child_args, args.other, args.rounds)
    return 0
