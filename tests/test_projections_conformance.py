"""The read models the conformance scenarios should give (see ../shared/conformance/README)."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from projections import column_lineage
from projections.common import job_id
from projections.runner import catch_up
from tests.logdata import append
from tests.support import CONFORMANCE, conformance_events
from tests.test_projections_rules import CURRENT_FIELDS

Conn = psycopg.Connection[Any]


def fold_scenario(conn: Conn, *folders: str) -> None:
    for folder in folders:
        append(conn, conformance_events(folder))
    catch_up(conn)


def dataset_of(conn: Conn, namespace: str, name: str) -> Any:
    row = conn.execute(
        "SELECT dataset_id FROM readmodel.dataset_names WHERE namespace = %s AND name = %s",
        (namespace, name),
    ).fetchone()
    return row[0] if row else None


def test_airflow_task_runs_have_their_dag_run_as_parent(conn: Conn) -> None:
    fold_scenario(conn, "scenarios/airflow")
    runs = conn.execute(
        "SELECT id, job_name, parent_run_id, root_run_id, state FROM readmodel.runs"
    ).fetchall()
    by_id = {r[0]: r for r in runs}
    dags = {r[1]: r[0] for r in runs if r[2] is None}
    assert set(dags) == {"BQ", "dag", "gcs_hook"}
    tasks = [r for r in runs if r[2] is not None]
    assert tasks
    for _, job_name, parent, root, _ in tasks:
        dag = job_name.split(".")[0]
        assert by_id[parent][1] == dag
        assert root == dags[dag]
    for dag_run in dags.values():
        assert by_id[dag_run][3] == dag_run  # a run without parent is its own root
    # The task jobs name their DAG job as parent.
    parents = dict(
        conn.execute(
            "SELECT name, parent_job_id FROM readmodel.jobs WHERE namespace = 'airflow'"
        ).fetchall()
    )
    assert parents["BQ.upload"] == job_id("airflow", "BQ")


def test_airflow_datasets_are_linked_through_the_tasks(conn: Conn) -> None:
    fold_scenario(conn, "scenarios/airflow")
    edges = conn.execute(
        "SELECT j.name, e.direction, e.namespace FROM readmodel.job_edges e "
        "JOIN readmodel.jobs j ON j.id = e.job_id"
    ).fetchall()
    namespaces = {e[2] for e in edges}
    assert any(ns.startswith("gs://") for ns in namespaces)
    assert "bigquery" in namespaces
    assert {e[1] for e in edges} == {"input", "output"}
    assert all("." in e[0] for e in edges)  # tasks, not DAGs, read and write


def test_dataproc_child_runs_link_to_the_application_run(conn: Conn) -> None:
    folders = [
        "scenarios/spark_dataproc_bigquery_shakespare",
        "scenarios/spark_dataproc_simple_producer_test",
        "scenarios/spark_dataproc_simple_producer_test_complete",
    ]
    fold_scenario(conn, *folders)
    runs = conn.execute(
        "SELECT id, job_name, parent_run_id, root_run_id FROM readmodel.runs"
    ).fetchall()
    apps = {r[0]: r[1] for r in runs if r[2] is None}
    children = [r for r in runs if r[2] is not None]
    assert children and apps
    for _, job_name, parent, root in children:
        assert parent in apps
        assert job_name.startswith(apps[parent] + ".")
        assert root == parent


def test_dataproc_complete_scenario_has_terminal_states_and_times(conn: Conn) -> None:
    fold_scenario(conn, "scenarios/spark_dataproc_simple_producer_test_complete")
    rows = conn.execute(
        "SELECT state, started_at, ended_at, first_seen, last_seen FROM readmodel.runs"
    ).fetchall()
    assert rows and all(r[0] == "COMPLETE" for r in rows)
    for _, started, ended, first, last in rows:
        assert ended == last
        assert started is None or started == first


def test_seed_spark_trino_three_names_two_of_them_one_dataset(conn: Conn) -> None:
    fold_scenario(conn, "scenarios/seed_spark_trino")
    spark = dataset_of(conn, "s3a://warehouse", "sales.db/orders_daily")
    hive = dataset_of(conn, "hive://hive-metastore:9083", "sales.orders_daily")
    trino_ns = (
        "trino://trino-coordinator-default-0.trino-coordinator-default.prod.svc.cluster.local:8443"
    )
    trino = dataset_of(conn, trino_ns, "lakehouse.sales.orders_daily")
    assert spark is not None and spark == hive
    assert trino is not None and trino != spark
    # The id is not a name: one dataset row, found by either name, displayed under its
    # most table-like name (the symlink of type TABLE, not the storage path).
    row = conn.execute(
        "SELECT namespace, name, merged_into FROM readmodel.datasets WHERE id = %s", (spark,)
    ).fetchone()
    assert row == ("hive://hive-metastore:9083", "sales.orders_daily", None)
    kinds = dict(
        conn.execute(
            "SELECT name, kind FROM readmodel.dataset_names WHERE dataset_id = %s", (spark,)
        ).fetchall()
    )
    assert kinds == {"sales.db/orders_daily": "emitted", "sales.orders_daily": "symlink"}
    namespaces = dict(
        conn.execute("SELECT name, has_datasets FROM readmodel.namespaces").fetchall()
    )
    assert namespaces["hive://hive-metastore:9083"] is True
    assert namespaces["prod-lineage"] is False


def test_cll_column_lineage_matches_the_reference_facet(conn: Conn) -> None:
    fold_scenario(conn, "scenarios/CLL")
    reference = json.loads((CONFORMANCE / "scenarios/CLL/8.json").read_bytes())
    facet = reference["outputs"][0]["facets"]["columnLineage"]["fields"]
    expected = {
        (out, f["namespace"], f["name"], f["field"]): f.get("transformations", [])
        for out, spec in facet.items()
        for f in spec["inputFields"]
    }
    rows = conn.execute(
        "SELECT out_field, in_namespace, in_name, in_field, transformations, run_id "
        f"FROM ({column_lineage.PAIRS}) p "
        "WHERE out_namespace = 'file' AND out_name = '/tmp/cll_test/tbl1'"
    ).fetchall()
    assert {r[:4]: r[4] for r in rows} == expected
    assert {"ident", "trans", "agg"} <= {r[0] for r in rows}
    assert ("agg", "file", "/tmp/cll_test/cll_source2", "c") in expected
    assert {str(r[5]) for r in rows} == {reference["run"]["runId"]}
    # The job reads both sources and writes tbl1.
    name = (
        "open_lineage_integration_create_table.execute_create_hive_table_as_select_command"
        ".default_tbl1"
    )
    edges = set(
        conn.execute(
            "SELECT direction, name FROM readmodel.job_edges WHERE job_id = %s",
            (job_id("testColumnLevelLineage", name),),
        ).fetchall()
    )
    assert {
        ("input", "/tmp/cll_test/cll_source1"),
        ("input", "/tmp/cll_test/cll_source2"),
        ("output", "/tmp/cll_test/tbl1"),
    } <= edges
    fields = conn.execute(
        f"SELECT {CURRENT_FIELDS} FROM readmodel.datasets d JOIN readmodel.dataset_names n "
        "ON n.dataset_id = d.id WHERE n.namespace = 'file' AND n.name = '/tmp/cll_test/tbl1'"
    ).fetchone()
    assert fields is not None
    assert [f["name"] for f in fields[0]] == ["ident", "trans", "agg"]


def test_malformed_facets_are_ignored_never_fatal(conn: Conn) -> None:
    events = [json.loads(p.read_bytes()) for p in sorted((CONFORMANCE / "facet_invalid").glob("*"))]
    events += [json.loads(p.read_bytes()) for p in sorted((CONFORMANCE / "valid").glob("*"))]
    append(conn, events)
    assert catch_up(conn) == len(events)
    assert conn.execute("SELECT count(*) FROM dead_letters").fetchone() == (0,)
    run_ids = {e["run"]["runId"] for e in events if "run" in e}
    stored = {str(r[0]) for r in conn.execute("SELECT id FROM readmodel.runs")}
    assert stored == run_ids
