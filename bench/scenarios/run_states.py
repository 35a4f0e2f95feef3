"""A run's state as of T (what an as-of page or graph shows of a run), A/B, answers compared.

    python -m bench.scenario run-states --other REV [--events 200000] [--streaming 20000]
        [--rounds 2]

Folds `--events` events of the benchmark workload (bench/datagen.py) into a throwaway
PostgreSQL with this checkout's migrations and projector, and `--streaming` RUNNING events
of one streaming run (a START, then one a minute, as Flink reports a running job) still
running. Then, at nine moments spread over the log's event times, reads the state of every
run with each tree's `asof.RUN_AT_JOIN` (the same join the job, lineage and dataset reads
use), in turns, and the streaming run's alone at each moment, as prepared statements (as
the API runs them): prints the best time of each side per moment and whether the two
answers are equal, row for row. Both sides read the same store, with this checkout's
indexes.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from bench import datagen
from bench.ab import other_tree, turns
from bench.datagen import to_record
from bench.harness import cluster, copy_records, load_workload
from bench.scenario import parser
from bench.sizes import SEED
from projections.runner import catch_up

# A tree's join (run with that tree first on the path): JSON on stdout.
DUMP = "import json; from metastore.api import asof; print(json.dumps(asof.RUN_AT_JOIN))"
EVERY_RUN = """SELECT lr.run_id, s.event_type, s.event_time
FROM readmodel.lineage_runs lr{join} ORDER BY lr.run_id"""
ONE_RUN = """SELECT s.event_type, s.event_time
FROM readmodel.lineage_runs lr{join} WHERE lr.run_id = %(run)s"""
STREAMING_JOB = ("flink", "clicks_by_minute")


def join_of(tree: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", DUMP], cwd=tree, capture_output=True, text=True, check=True
    )
    found: str = json.loads(done.stdout)
    return found


def streaming_run(url: str, minutes: int, start: dt.datetime) -> uuid.UUID:
    """A run of STREAMING_JOB that started at `start` and reported RUNNING once a minute,
    COPYed into the log as ingest would record it."""
    run = uuid.uuid4()

    def event(kind: str, when: dt.datetime) -> bytes:
        return json.dumps(
            {
                "eventType": kind,
                "eventTime": when.isoformat().replace("+00:00", "Z"),
                "producer": "https://github.com/apache/flink",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                "run": {"runId": str(run)},
                "job": {"namespace": STREAMING_JOB[0], "name": STREAMING_JOB[1]},
                "inputs": [],
                "outputs": [],
            }
        ).encode()

    moments = [(i, start + dt.timedelta(minutes=i)) for i in range(minutes + 1)]
    copy_records(url, (to_record(event("RUNNING" if i else "START", t)) for i, t in moments))
    return run


def best(seconds: list[float]) -> str:
    return f"{min(seconds) * 1000:,.1f}"


def main(argv: list[str]) -> int:
    cli = parser("run-states", __doc__, rounds=2)
    cli.add_argument("--events", type=int, default=200_000)
    cli.add_argument("--streaming", type=int, default=20_000, help="the streaming run's events")
    args = cli.parse_args(argv)
    with other_tree(args.other) as trees, cluster("run-states", warm=False, durable=False) as pg:
        joins = {name: join_of(tree) for name, tree in trees}
        url = pg.database()
        gen = load_workload(url, args.events, 20_000, SEED)
        span = gen.clock - datagen.START_TIME
        streaming = streaming_run(url, args.streaming, datagen.START_TIME)
        catch_up(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            conn.execute("SET jit = off")  # (as the API's read pool: metastore/db.py)
            (runs,) = conn.execute("SELECT count(*) FROM readmodel.lineage_runs").fetchone() or (0,)
            print(f"{runs:,} runs; the streaming run of {args.streaming + 1:,} events")
            print("moment | every run, ms: " + " / ".join(joins) + " | same | streaming run, ms")
            for k in range(1, 10):
                moment = datagen.START_TIME + span * k / 10
                every: dict[str, list[float]] = {name: [] for name in joins}
                one: dict[str, list[float]] = {name: [] for name in joins}
                answers: dict[str, Any] = {}
                for _, name in turns(list(joins), args.rounds):
                    t0 = time.perf_counter()
                    statement = EVERY_RUN.format(join=joins[name])
                    rows = conn.execute(statement, {"as_of": moment}, prepare=True)
                    answers[name] = rows.fetchall()
                    t1 = time.perf_counter()
                    params = {"as_of": moment, "run": streaming}
                    statement = ONE_RUN.format(join=joins[name])
                    state = conn.execute(statement, params, prepare=True).fetchall()
                    one[name].append(time.perf_counter() - t1)
                    every[name].append(t1 - t0)
                    answers[name + " streaming"] = state
                same = all(answers[n] == answers["this"] for n in joins) and all(
                    answers[n + " streaming"] == answers["this streaming"] for n in joins
                )
                print(
                    f"{moment:%Y-%m-%d %H:%M} | "
                    + " / ".join(best(every[n]) for n in joins)
                    + f" | {'yes' if same else 'NO'} | "
                    + " / ".join(best(one[n]) for n in joins)
                )
    return 0
