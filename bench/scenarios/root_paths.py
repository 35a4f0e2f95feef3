"""The runs' root-path extension (projections.runs.EXTEND_PATHS) on statistics of few roots, A/B.

    python -m bench.scenario root-paths [--parents 10000] [--rounds 3] [--other TREE]

Folds 300 Spark runs under one parent run, ANALYZEs `runs` (autovacuum off for it: its
statistics now say one root holds every run), then folds `--parents` more parents' three
runs each, as a store looks whose first batches came from one DAG run. Then EXPLAIN
ANALYZEs each tree's statement in turns, as the fold runs it (INDEX_PROBES_ONLY, no JIT,
rolled back), for 50 tops that are no run's root (nothing moves, a live batch's usual case)
and for 50 that are (their runs move), against 700 of the batch's runs. Prints execution
time and buffers.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path

import psycopg

from bench import datagen
from bench.ab import other_tree, turns
from bench.harness import cluster, copy_records, python_child
from bench.scenario import parser
from projections.runner import catch_up

SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
# (in each tree's code: its statement, its parameters)
EXPLAIN = """
import json, sys, uuid, psycopg
from projections import runs
from projections.common import INDEX_PROBES_ONLY, row_param
url, which = sys.argv[1], sys.argv[2]
with psycopg.connect(url) as conn:
    conn.execute("SET search_path TO readmodel, public")
    conn.execute("SET jit = off")
    for method in INDEX_PROBES_ONLY:
        conn.execute(f"SET {method} = off")
    moved = "root_run_id <> id" if which == "moving" else "false"
    tops = conn.execute(
        "SELECT coalesce(array_agg(DISTINCT root_run_id) FILTER (WHERE " + moved + "), '{}'),"
        " array_agg(id) FILTER (WHERE root_run_id <> id) FROM readmodel.runs").fetchone()
    tops, children = (tops[0] or tops[1])[:50], tops[1]
    (rows,) = row_param(runs.TOP_TYPES, [tops, ["{" + str(uuid.uuid4()) + "}" for _ in tops]])
    query = runs.EXTEND_PATHS.replace("%s::jsonb", "%(tops)s::jsonb").replace("%b", "%(ids)s")
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query,
                        {"tops": rows, "ids": children[:700]}).fetchone()[0][0]
    conn.rollback()
    print(json.dumps([plan["Execution Time"], plan["Plan"].get("Shared Hit Blocks", 0)]))
"""


def _children(parent: str, count: int, first: int) -> list[bytes]:
    facet = {"run": {"runId": parent}, "job": {"namespace": "airflow", "name": "dag.task"}}
    events = []
    for i in range(first, first + count):
        event = {
            "eventType": "COMPLETE",
            "eventTime": "2026-09-01T10:00:00Z",
            "producer": SPARK,
            "schemaURL": SCHEMA,
            "job": {"namespace": "spark", "name": f"job_{i % 50}"},
            "run": {"runId": str(uuid.uuid4()), "facets": {"parent": facet}},
            "inputs": [],
            "outputs": [],
        }
        events.append(json.dumps(event).encode())
    return events


def main(argv: list[str]) -> int:
    cli = parser("root-paths", __doc__)
    cli.add_argument("--parents", type=int, default=10_000)
    args = cli.parse_args(argv)
    with (
        other_tree(args.other) as sides,
        tempfile.TemporaryDirectory(prefix="metastore-root-paths-") as tmp,
        cluster("root-paths", warm=False, durable=False) as pg,
    ):
        url = pg.database()
        with psycopg.connect(url) as conn:
            catch_up(conn)
            conn.execute("ALTER TABLE readmodel.runs SET (autovacuum_enabled = false)")
            conn.commit()
            copy_records(url, map(datagen.to_record, _children(str(uuid.uuid4()), 300, 0)))
            catch_up(conn)
            conn.execute("ANALYZE readmodel.runs")
            conn.commit()
            later = [_children(str(uuid.uuid4()), 3, 3 * p) for p in range(args.parents)]
            copy_records(url, (datagen.to_record(e) for batch in later for e in batch))
            catch_up(conn)
        for round_, (name, tree) in turns(sides, args.rounds):
            for which in ("nothing moves", "moving"):
                out = python_child(EXPLAIN, [url, which], Path(tmp) / "explain.log", cwd=tree)
                ms, hits = json.loads(out)
                print(f"round {round_ + 1} {name:<6} {which:<14} {ms:8.2f} ms {hits:>8} buffers")
    return 0
