"""The fold rules behind what Cockpit shows: a dataset's display name, a job's integration,
the lifecycle change of a lineage edge, every job of a field edge; each the same whatever
order the events arrive in."""

from __future__ import annotations

from typing import Any

import psycopg

from projections.column_lineage import PAIRS
from projections.common import dataset_id, job_id
from projections.jobs import integration_of
from projections.runner import catch_up
from tests.logdata import append
from tests.test_projections_rules import new_id, run_event, symlinked

Conn = psycopg.Connection[Any]
NS = "rules"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/spark"


def fold(conn: Conn, *events: dict[str, Any]) -> None:
    append(conn, events)
    catch_up(conn)


def display(conn: Conn, namespace: str, name: str) -> tuple[str, str]:
    row = conn.execute(
        "SELECT d.namespace, d.name FROM readmodel.dataset_names n "
        "JOIN readmodel.datasets d ON d.id = n.dataset_id "
        "WHERE n.namespace = %s AND n.name = %s",
        (namespace, name),
    ).fetchone()
    assert row is not None
    return row  # type: ignore[no-any-return]


def test_the_display_name_is_the_table_symlink_in_either_order(conn: Conn) -> None:
    for table, first_with_symlink in (("a", True), ("b", False)):
        path = ("s3a://warehouse", f"sales.db/{table}")
        hive = ("hive://metastore:9083", f"sales.{table}")
        plain = run_event("START", 1, new_id(), f"write_{table}", outputs=[symlinked(*path)])
        linked = run_event(
            "COMPLETE", 2, new_id(), f"write_{table}", outputs=[symlinked(*path, hive)]
        )
        fold(conn, *((linked, plain) if first_with_symlink else (plain, linked)))
        assert display(conn, *path) == hive == display(conn, *hive)


def test_a_merge_keeps_the_more_table_like_display_name(conn: Conn) -> None:
    hive = ("hive://metastore:9083", "sales.merged")
    # Two datasets: a storage path, and a Trino-like name that has the Hive name as symlink.
    fold(conn, run_event("START", 1, new_id(), "w1", outputs=[symlinked("s3a://w", "merged")]))
    fold(conn, run_event("START", 2, new_id(), "w2", outputs=[symlinked("trino://t", "m", hive)]))
    assert display(conn, "s3a://w", "merged") == ("s3a://w", "merged")
    # An event ties the storage path to the Hive name: they merge into the first seen,
    # which shows the Hive name (a TABLE symlink) from the absorbed dataset.
    fold(
        conn,
        run_event("COMPLETE", 3, new_id(), "w1", outputs=[symlinked("s3a://w", "merged", hive)]),
    )
    merged = conn.execute(
        "SELECT id, namespace, name FROM readmodel.datasets WHERE merged_into IS NULL AND id = %s",
        (dataset_id("s3a://w", "merged"),),
    ).fetchone()
    assert merged is not None and merged[1:] == hive
    assert display(conn, "trino://t", "m") == hive


def test_integration_comes_from_the_job_type_facet_else_the_producer_url(conn: Conn) -> None:
    plain = run_event("START", 1, new_id(), "from_producer")
    plain["producer"] = SPARK
    typed = run_event(
        "START", 1, new_id(), "from_facet", job_facets={"jobType": {"integration": "FLINK"}}
    )
    typed["producer"] = SPARK
    fold(conn, plain, typed)
    rows = dict(
        conn.execute("SELECT name, integration FROM readmodel.jobs WHERE namespace = %s", (NS,))
    )
    assert rows == {"from_producer": "SPARK", "from_facet": "FLINK"}
    assert integration_of(
        "https://github.com/apache/airflow/tree/providers-openlineage/1.14.0"
    ) == ("AIRFLOW")
    assert integration_of(
        "https://github.com/OpenLineage/OpenLineage/tree/1.2/integration/dbt"
    ) == ("DBT")
    assert integration_of("https://example.com/tests") is None


def lifecycle(change: str) -> dict[str, Any]:
    return {"lifecycleStateChange": {"lifecycleStateChange": change}}


def test_an_edges_lifecycle_is_its_latest_report_whatever_the_order(conn: Conn) -> None:
    for table, reversed_ in (("x", False), ("y", True)):
        run = new_id()
        out = {"namespace": "s3a://w", "name": table}
        events = [
            run_event(
                "START", 1, run, f"drop_{table}", outputs=[{**out, "facets": lifecycle("CREATE")}]
            ),
            run_event(
                "COMPLETE", 3, run, f"drop_{table}", outputs=[{**out, "facets": lifecycle("DROP")}]
            ),
            run_event("RUNNING", 5, run, f"drop_{table}", outputs=[out]),  # no facet: no change
        ]
        fold(conn, *(reversed(events) if reversed_ else events))
        states = conn.execute(
            "SELECT (SELECT lifecycle_state FROM readmodel.run_edges WHERE run_id = %s), "
            "(SELECT lifecycle_state FROM readmodel.job_edges WHERE job_id = %s)",
            (run, job_id(NS, f"drop_{table}")),
        ).fetchone()
        assert states == ("DROP", "DROP"), table


def column_lineage(*jobs: str) -> list[dict[str, Any]]:
    facet = {
        "columnLineage": {
            "fields": {
                "total": {
                    "inputFields": [{"namespace": "s3a://w", "name": "src", "field": "amount"}]
                }
            }
        }
    }
    return [
        run_event(
            "COMPLETE",
            i + 1,
            new_id(),
            j,
            outputs=[{"namespace": "s3a://w", "name": "dst", "facets": facet}],
        )
        for i, j in enumerate(jobs)
    ]


def test_a_field_edge_keeps_every_job_that_reported_it(conn: Conn) -> None:
    first, second, third = column_lineage("cl_a", "cl_b", "cl_c")
    fold(conn, first, second)  # one batch
    fold(conn, third, first)  # later, and a repeat
    # (the three jobs send the same facet: one report of `dst`)
    row = conn.execute(
        "SELECT job_id, job_ids FROM readmodel.column_lineage WHERE out_name = 'dst'"
    ).fetchone()
    assert row is not None
    assert row[0] == job_id(NS, "cl_c")  # the latest report's
    assert sorted(row[1]) == sorted(job_id(NS, j) for j in ("cl_a", "cl_b", "cl_c"))


def test_a_facet_every_run_sends_is_stored_once(conn: Conn) -> None:
    """Column lineage is stored by report: five runs of a job sending the same facet keep
    one copy of its pairs; a sixth with a changed facet adds one, and the pair it dropped
    is still among the output's (every pair ever reported), with its transformations."""
    same = column_lineage(*["cl_same"] * 5)
    changed = column_lineage("cl_same")[0]
    changed["eventTime"] = "2026-01-01T11:00:00Z"  # after the five
    changed["outputs"][0]["facets"] = {
        "columnLineage": {
            "fields": {
                "tax": {"inputFields": [{"namespace": "s3a://w", "name": "src", "field": "vat"}]}
            }
        }
    }
    fold(conn, *same, changed)
    counts = conn.execute(
        "SELECT (SELECT count(*) FROM readmodel.column_reports), "
        "(SELECT count(*) FROM readmodel.column_lineage WHERE out_name = 'dst'), "
        "(SELECT count(*) FROM readmodel.column_lineage_runs WHERE out_name = 'dst')"
    ).fetchone()
    assert counts == (2, 2, 6)
    pairs = conn.execute(
        f"SELECT out_field, in_field, transformations FROM ({PAIRS}) p WHERE out_name = 'dst'"
    ).fetchall()
    assert sorted(pairs) == [("tax", "vat", []), ("total", "amount", [])]
