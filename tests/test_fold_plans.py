"""The fold's statements that match a batch's ids against a table probe its index whatever
the table's statistics say (projections.common.INDEX_PROBES_ONLY).

A store's tables grow faster than autovacuum analyzes them: with statistics from when
`run_edges` was nearly empty, lineage's settle of a batch's run edges read every output
edge once, kept them and compared them with each run of the batch, a cost that grew with
the table and held the projection lag at seconds (docs/PERFORMANCE.md, issue 46).
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from metastore import pgarray
from projections import dataset_writes
from projections.common import INDEX_PROBES_ONLY, planner_without, row_param
from projections.datasets import SELECT_DATASETS, SELECT_NAMES, SELECT_VERSIONS, SYNC_FIELDS
from projections.failing import REFOLD, SINCE_TYPES
from projections.fold import tune_session
from projections.lineage import (
    RESETTLE_JOB_WRITES,
    SETTLE_HELD_OFF,
    SETTLE_HELD_ON,
    SETTLE_JOB_ATTEMPTS,
    SETTLE_JOB_WRITES,
    SETTLE_RUN_WRITES,
)
from projections.runner import catch_up
from projections.runs import EXTEND_PATHS, MOVE_ROOTS, TOP_TYPES
from tests.logdata import append, copies
from tests.plans import generic_plan, numbered
from tests.support import all_scenario_events, run_event, schema_facet

Conn = psycopg.Connection[Any]


def fold_with_statistics_of_one_copy(conn: Conn, tables: tuple[str, ...]) -> None:
    """Folds 41 copies of the scenarios, `tables` analyzed after the first only."""
    for table in tables:  # (no ANALYZE but ours)
        conn.execute(f"ALTER TABLE readmodel.{table} SET (autovacuum_enabled = false)")
    append(conn, copies(all_scenario_events(), 1, salt="first"))
    catch_up(conn)
    conn.execute("ANALYZE " + ", ".join(f"readmodel.{t}" for t in tables))
    conn.commit()
    append(conn, copies(all_scenario_events(), 40, salt="later"))
    catch_up(conn)


def probes_plan(conn: Conn, query: str, params: dict[str, Any] | tuple[Any, ...]) -> str:
    """The plan of `query` as the fold runs it (under INDEX_PROBES_ONLY)."""
    pgarray.register(conn)  # (row_param's arrays)
    with conn.transaction():
        conn.execute("SET LOCAL search_path TO readmodel, public")
        with planner_without(conn, *INDEX_PROBES_ONLY):
            explained = conn.execute("EXPLAIN (COSTS OFF) " + query, params)  # type: ignore[call-overload]
            return "\n".join(line for (line,) in explained)


def probes_plans(conn: Conn, query: str, params: dict[str, Any] | tuple[Any, ...]) -> list[str]:
    """Both plans the fold runs `query` with (under INDEX_PROBES_ONLY, planned once): a
    batch's own plan until psycopg prepares it, and the generic plan kept from then on."""
    return [probes_plan(conn, query, params), generic_plan(conn, query, *INDEX_PROBES_ONLY)]


def whole_index_scans(plan: str) -> list[str]:
    """The plan's index scans without an index condition: each reads its whole index."""
    lines = plan.splitlines()
    return [
        line
        for line, after in zip(lines, [*lines[1:], ""], strict=True)
        if "Index Scan using" in line or "Index Only Scan using" in line
        if "Index Cond" not in after
    ]


def test_the_settle_of_run_edges_probes_by_run_with_statistics_of_a_nearly_empty_table(
    conn: Conn,
) -> None:
    fold_with_statistics_of_one_copy(conn, ("run_edges", "lineage_runs"))
    row = conn.execute("SELECT array_agg(run_id) FROM readmodel.lineage_runs").fetchone()
    assert row is not None and len(row[0]) > 1000
    for plan in probes_plans(conn, SETTLE_RUN_WRITES, {"runs": row[0]}):
        assert "Index Scan using run_edges_pkey on run_edges" in plan, plan
        assert "Materialize" not in plan and "Seq Scan" not in plan, plan


def _daily_writes(day: int, jobs: int) -> list[dict[str, Any]]:
    """A day of `jobs` Spark jobs, each reading its own table and writing today's partition
    of another (a new name a run), every fifth run FAILing."""
    events = []
    for j in range(jobs):
        run, when = str(uuid.uuid4()), f"2026-09-01T10:{day % 60:02d}:{j % 60:02d}Z"
        job = ("spark", f"load_{j}")
        read = {"namespace": "s3a://raw", "name": f"events_{j}"}
        wrote = {"namespace": "s3a://warehouse", "name": f"daily_{j}/day={day}"}
        end = "FAIL" if (day + j) % 5 == 0 else "COMPLETE"
        events.append(run_event("START", when, SPARK, job, run, [read], [wrote]))
        events.append(run_event(end, when, SPARK, job, run, [read], [wrote]))
    return events


def latest_names(conn: Conn, count: int) -> tuple[list[str], list[str], list[bytes]]:
    """The `count` dataset names seen last: a batch's names, as the datasets loads take them
    (namespaces, names, and an empty schema hash each for the versions' load)."""
    names = conn.execute(
        "SELECT array_agg(namespace), array_agg(name), array_agg(''::bytea) FROM (SELECT *"
        " FROM readmodel.dataset_names ORDER BY first_seen DESC, name LIMIT %s) n",
        (count,),
    ).fetchone()
    assert names is not None and len(names[0]) == count
    return names[0], names[1], names[2]


def test_a_live_batch_probes_by_key_with_statistics_of_a_fresh_store(
    conn: Conn,
) -> None:
    # The projector's live batches are small (50 events at 1,000 events/s). With the
    # statistics of a fresh store (its tables vacuumed empty) and a batch's 30 runs, the
    # settle of run edges read every output edge through run_edges_job (its second column
    # alone), the datasets projection's three loads hashed every name (or probed by
    # namespace and filtered) and the failing spans' refold hashed every run: 12-17 ms of a
    # 30 ms batch at 20,000 events, growing with the store (docs/PERFORMANCE.md).
    tables = ("run_edges", "lineage_runs", "dataset_names", "datasets", "dataset_versions",
              "runs", "failing_spans")  # fmt: skip
    for table in tables:  # (no ANALYZE but ours)
        conn.execute(f"ALTER TABLE readmodel.{table} SET (autovacuum_enabled = false)")
    conn.commit()
    conn.autocommit = True  # (a fresh store's statistics: the tables vacuumed empty)
    conn.execute("VACUUM ANALYZE " + ", ".join(f"readmodel.{t}" for t in tables))
    conn.autocommit = False
    for day in range(1, 31):
        append(conn, _daily_writes(day, 40))
    catch_up(conn)
    runs = conn.execute(
        "SELECT array_agg(run_id) FROM (SELECT run_id FROM readmodel.lineage_runs"
        " ORDER BY started_at DESC LIMIT 30) r"
    ).fetchone()
    assert runs is not None and len(runs[0]) == 30
    for plan in probes_plans(conn, SETTLE_RUN_WRITES, {"runs": runs[0]}):
        assert "Bitmap" not in plan and "run_edges_job" not in plan, plan
        assert "Index Scan using run_edges_pkey on run_edges" in plan, plan
        assert "Tid Scan on run_edges t" in plan, plan
        assert not whole_index_scans(plan), plan

    names = latest_names(conn, 8)
    for query, params in ((SELECT_NAMES, names[:2]), (SELECT_DATASETS, names[:2]),
                          (SELECT_VERSIONS, names)):  # fmt: skip
        plan = probes_plan(conn, query.replace("%b", "%s"), tuple(params))
        assert "Index Scan using dataset_names_pkey on dataset_names" in plan, plan
        assert "Seq Scan" not in plan and "Hash Join" not in plan, plan
        assert "dataset_names_namespace_dataset" not in plan, plan
        assert not whole_index_scans(plan), plan

    jobs = conn.execute("SELECT array_agg(id), array_agg(first_seen) FROM readmodel.jobs")
    job_ids, seen = jobs.fetchone() or ([], [])
    for plan in probes_plans(conn, REFOLD, row_param(SINCE_TYPES, [job_ids[:6], seen[:6]])):
        assert "Tid Scan on failing_spans f" in plan, plan
        assert "Seq Scan" not in plan and "Hash Join" not in plan, plan
        assert not whole_index_scans(plan), plan


def test_the_settle_of_job_edges_probes_by_run_with_statistics_of_nearly_empty_tables(
    conn: Conn,
) -> None:
    # (read every output edge of run_edges and job_edges and compared each job edge with
    # each of the batch's: 1.3 s a batch of 700 runs at 30,000 events)
    fold_with_statistics_of_one_copy(conn, ("run_edges", "job_edges", "lineage_runs"))
    row = conn.execute("SELECT array_agg(run_id) FROM readmodel.lineage_runs").fetchone()
    assert row is not None and len(row[0]) > 1000
    for query in (SETTLE_JOB_WRITES, RESETTLE_JOB_WRITES, SETTLE_JOB_ATTEMPTS):
        for plan in probes_plans(conn, query, {"runs": row[0]}):
            assert "Index Scan using run_edges_pkey on run_edges" in plan, plan
            assert "Tid Scan on job_edges t" in plan, plan  # (each edge found by its key first)
            assert "Seq Scan" not in plan and "Bitmap" not in plan, plan
            # (its job edge by key: by the table's name, every job that wrote it)
            assert "Index Scan using job_edges_pkey on job_edges" in plan, plan
            assert "job_edges_dataset" not in plan, plan


def test_the_settle_of_held_edges_probes_by_job_with_statistics_of_nearly_empty_tables(
    conn: Conn,
) -> None:
    # (job_edges.held_now: each job's latest run, its held edges and its run's edges, by
    # index whatever the statistics: a scan of lineage_runs or job_edges a batch would
    # grow with the store)
    fold_with_statistics_of_one_copy(conn, ("run_edges", "job_edges", "lineage_runs"))
    # (41 runs of each job: the statistics of one say a job has one)
    row = conn.execute("SELECT array_agg(DISTINCT job_id) FROM readmodel.lineage_runs").fetchone()
    assert row is not None and len(row[0]) >= 20
    for query in (SETTLE_HELD_OFF, SETTLE_HELD_ON):
        for plan in probes_plans(conn, query, {"jobs": row[0]}):
            assert "Index Only Scan using lineage_runs_job on lineage_runs" in plan, plan
            assert "Tid Scan on job_edges t" in plan, plan
            assert "on run_edges_pkey" in plan or "using run_edges_pkey" in plan, plan
            assert "Seq Scan" not in plan and "run_edges_dataset" not in plan, plan
            assert "job_edges_dataset" not in plan, plan
    for off in probes_plans(conn, SETTLE_HELD_OFF, {"jobs": row[0]}):
        assert "Index Cond: (job_id = j.job_id)" in off and "job_edges_held" in off, off


def test_the_sync_of_dataset_fields_probes_by_dataset_with_statistics_of_nearly_empty_tables(
    conn: Conn,
) -> None:
    tables = ("dataset_fields", "dataset_names", "version_sightings", "dataset_versions")
    fold_with_statistics_of_one_copy(conn, tables)
    ids = conn.execute("SELECT array_agg(DISTINCT dataset_id) FROM readmodel.dataset_names")
    runs = conn.execute("SELECT array_agg(run_id) FROM readmodel.lineage_runs")
    params = {"ids": ids.fetchone()[0], "runs": runs.fetchone()[0]}  # type: ignore[index]
    assert len(params["runs"]) > 1000
    query = SYNC_FIELDS.replace("%(ids)b", "%(ids)s").replace("%(runs)b", "%(runs)s")
    plan = probes_plan(conn, query, params)
    assert "Seq Scan" not in plan and "Hash Join" not in plan, plan
    assert "Index Cond: (run_id = r.run_id)" in plan, plan  # (a probe per run)
    assert "Index Scan using dataset_fields_dataset" in plan, plan


def test_the_settle_of_versions_probes_by_run_with_statistics_of_nearly_empty_tables(
    conn: Conn,
) -> None:
    # (a batch's ended runs onto their stored sightings, then the versions those change:
    # by run, by name, by dataset, each a key, whatever the statistics)
    tables = ("version_sightings", "dataset_names", "dataset_versions", "runs")
    fold_with_statistics_of_one_copy(conn, tables)
    row = conn.execute("SELECT array_agg(run_id) FROM readmodel.lineage_runs").fetchone()
    assert row is not None and len(row[0]) > 1000
    params = (pgarray.uuid_array(row[0]), [True] * len(row[0]))
    for plan in probes_plans(conn, dataset_writes.SETTLE.replace("%b", "%s"), params):
        assert "Index Cond: (run_id = e_1.run_id)" in plan, plan
        assert "Seq Scan" not in plan and "Hash Join" not in plan, plan
        assert not whole_index_scans(plan), plan
    moved = generic_plan(conn, MOVE_ROOTS, *INDEX_PROBES_ONLY)
    assert "Index Scan using runs_pkey on runs" in moved and not whole_index_scans(moved), moved


SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"


def _child_runs(parents: list[str], children: int) -> list[dict[str, Any]]:
    """`children` Spark runs under each of `parents` (an Airflow task's run each)."""
    events = []
    for p, parent in enumerate(parents):
        facet = {"run": {"runId": parent}, "job": {"namespace": "airflow", "name": "dag.task"}}
        for c in range(children):
            job, run = ("spark", f"job_{(p * children + c) % 50}"), str(uuid.uuid4())
            when = "2026-09-01T10:00:00Z"
            events.append(run_event("COMPLETE", when, SPARK, job, run, [], [], {"parent": facet}))
    return events


def test_the_extension_of_root_paths_probes_by_top_with_statistics_of_few_roots(
    conn: Conn,
) -> None:
    # Analyzed when one run was the root of all, runs_root's statistics said each root holds
    # every run: the planner read all of runs_root and tested each run against the batch's
    # ids and each top (30 s over 50 batches that moved nothing, at 100,000 events).
    conn.execute("ALTER TABLE readmodel.runs SET (autovacuum_enabled = false)")
    append(conn, _child_runs([str(uuid.uuid4())], 300))
    catch_up(conn)
    conn.execute("ANALYZE readmodel.runs")
    conn.commit()
    append(conn, _child_runs([str(uuid.uuid4()) for _ in range(2000)], 3))
    catch_up(conn)
    tops = conn.execute(
        "SELECT array_agg(DISTINCT root_run_id) FROM readmodel.runs WHERE root_run_id <> id"
    ).fetchone()
    batch = conn.execute("SELECT array_agg(id) FROM readmodel.runs").fetchone()
    assert tops is not None and batch is not None and len(tops[0]) > 2000
    tails = ["{" + str(uuid.uuid4()) + "}" for _ in tops[0][:50]]
    rows = row_param(TOP_TYPES, [tops[0][:50], tails])
    for plan in probes_plans(conn, EXTEND_PATHS, (*rows, pgarray.uuid_array(batch[0][:700]))):
        assert "Index Cond: (root_run_id = " in plan, plan  # (a probe per top)
        assert "Tid Scan on runs" in plan, plan
        assert "Join Filter" not in plan, plan


TABLE = {"namespace": "s3a://sales", "name": "orders"}


def _writes(run: str, when: str, fields: list[tuple[str, str | None]]) -> dict[str, Any]:
    facet = schema_facet(SPARK, [(n, "string") for n, _ in fields])
    facet["fields"] = [
        {"name": n, "type": "string", **({"description": d} if d else {})} for n, d in fields
    ]
    output = {**TABLE, "facets": {"schema": facet}}
    return run_event("COMPLETE", when, SPARK, ("spark-sales", "orders_etl"), run, [], [output])


FIELDS = "SELECT name, description, xmin::text FROM readmodel.dataset_fields ORDER BY name"


def test_a_dataset_written_again_with_its_schema_keeps_its_field_rows(conn: Conn) -> None:
    first = [("order_id", None), ("customer_id", "The buyer")]
    append(conn, [_writes("0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9d01", "2026-09-03T10:00:00Z", first)])
    catch_up(conn)
    before = conn.execute(FIELDS).fetchall()
    assert [(n, d) for n, d, _ in before] == [("customer_id", "The buyer"), ("order_id", None)]
    append(conn, [_writes("0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9d02", "2026-09-04T10:00:00Z", first)])
    catch_up(conn)
    assert conn.execute(FIELDS).fetchall() == before  # the same rows, not written again
    changed = [("order_id", "The order"), ("amount", None)]
    append(conn, [_writes("0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9d03", "2026-09-05T10:00:00Z", changed)])
    catch_up(conn)
    after = [(n, d) for n, d, _ in conn.execute(FIELDS).fetchall()]
    assert after == [("amount", None), ("order_id", "The order")]


def test_the_planner_s_methods_come_back_as_they_were_after_a_block(conn: Conn) -> None:
    # (the fold's own statements between blocks keep the session's plans; a caller's own
    # setting in the transaction stays; nothing outlives the transaction)
    shown = "SELECT current_setting('enable_hashjoin'), current_setting('enable_seqscan')"
    with conn.transaction():
        conn.execute("SET LOCAL enable_hashjoin = off")
        with planner_without(conn, *INDEX_PROBES_ONLY):
            assert conn.execute(shown).fetchone() == ("off", "off")
            assert conn.execute("SHOW enable_material").fetchone() == ("off",)
        assert conn.execute(shown).fetchone() == ("off", "on")
        assert conn.execute("SHOW enable_material").fetchone() == ("on",)
    assert conn.execute(shown).fetchone() == ("on", "on")


def test_the_datasets_loads_probe_by_key_with_statistics_of_a_nearly_empty_table(
    conn: Conn,
) -> None:
    # live-batches --streaming: with statistics from when datasets held a handful of rows,
    # `id IN (the names' ids)` put the whole table outside and probed every name of the
    # batch for each of its rows (700 datasets: 110,000 buffers, 210 ms a batch of 50).
    tables = ("datasets", "dataset_versions", "dataset_names")
    for table in tables:  # (no ANALYZE but ours)
        conn.execute(f"ALTER TABLE readmodel.{table} SET (autovacuum_enabled = false)")
    append(conn, _daily_writes(1, 2))
    catch_up(conn)
    conn.execute("ANALYZE " + ", ".join(f"readmodel.{t}" for t in tables))
    conn.commit()
    for day in range(2, 31):
        append(conn, _daily_writes(day, 40))
    catch_up(conn)
    names = latest_names(conn, 60)
    for query, params in ((SELECT_DATASETS, names[:2]), (SELECT_VERSIONS, names)):
        plan = probes_plan(conn, query.replace("%b", "%s"), tuple(params))
        assert not whole_index_scans(plan), plan
        assert "Seq Scan" not in plan and "Hash" not in plan, plan


# The fold's statements whose one plan is index probes by key under INDEX_PROBES_ONLY, kept
# once prepared (plan_once): planning them each batch cost a live batch more than running
# them (docs/PERFORMANCE.md, "Settles planned once"); each has its generic plan tested above.
PLANNED_ONCE = (
    SETTLE_RUN_WRITES, RESETTLE_JOB_WRITES, SETTLE_JOB_WRITES, SETTLE_JOB_ATTEMPTS,
    SETTLE_HELD_OFF, SETTLE_HELD_ON, dataset_writes.SETTLE, REFOLD, EXTEND_PATHS, MOVE_ROOTS,
)  # fmt: skip


def test_the_fold_plans_each_execution_for_the_tables_as_they_are_now(conn: Conn) -> None:
    # psycopg prepares a statement after five executions; PostgreSQL then kept a generic plan
    # made with the sizes of that moment until the next ANALYZE: made in a young store's
    # first batches, the fields' sync scanned all of dataset_fields each batch once it had
    # grown (a streaming scenario's batches of 50: p50 137 ms, 27 planned each time).
    # The log's reads and the settles keep theirs: their one plan is index probes, and
    # planning them each batch cost more than running them (test_log_reads_planned_once below).
    tune_session(conn)
    append(conn, _daily_writes(1, 4))
    catch_up(conn, limit=2)  # (many batches on this connection: its statements prepared)
    for day in range(2, 6):
        append(conn, _daily_writes(day, 40))
    catch_up(conn, limit=50)
    # (a statement without parameters has only its generic plan: those are left out)
    prepared = conn.execute(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        " WHERE cardinality(parameter_types) > 0"
    ).fetchall()
    once = {numbered(query)[0] for query in PLANNED_ONCE}
    log_reads = [p for p in prepared if "FROM event_log" in p[0]]
    settles = [p for p in prepared if p[0] in once]
    each = [p for p in prepared if p not in log_reads and p not in settles]
    assert len(each) > 10 and sum(custom for _, _, custom in each) > 0, each  # (prepared)
    assert not [p for p in each if p[1]]  # (planned for the tables as they are now)
    # the batch's read and its runs' facts (common.RUN_FACTS); the settles
    assert len(log_reads) == 2, log_reads
    assert len(settles) >= 7, settles  # (a run's root moved: not in this workload)
    assert all(custom == 0 for _, _, custom in log_reads + settles), log_reads + settles
    assert sum(generic for _, generic, _ in log_reads + settles) > 0, log_reads + settles
