"""Property: the read models do not depend on the order events arrive in, duplicates
included, nor on how the log was cut into batches; incremental folding equals a replay."""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metastore.catalogs import NO_CATALOGS, CatalogMap, parse_catalog_map
from projections.replay import rebuild
from projections.runner import catch_up
from projections.schema import PROJECTIONS
from tests.conftest import Server
from tests.logdata import append, dump_readmodel
from tests.support import conformance_events

SCENARIOS = ("airflow", "seed_spark_trino", "CLL", "spark_dataproc_simple_producer_test_complete")


def write_events() -> list[dict[str, Any]]:
    """The seed's Spark run, edited into the cases the write rule turns on: a run that
    FAILs reporting a new schema (its START says so too), one that ABORTs, one that names
    its output only in its START and COMPLETEs without outputs, and a STREAMING job whose
    RUNNING events would write but it FAILs."""
    start, complete = conformance_events("scenarios/seed_spark_trino")[:2]
    output = complete["outputs"][0]
    schema = {
        "_producer": complete["producer"],
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": [{"name": "id", "type": "long"}, {"name": "total", "type": "double"}],
    }
    streaming = {
        "jobType": {
            "_producer": complete["producer"],
            "_schemaURL": "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json",
            "processingType": "STREAMING",
            "integration": "SPARK",
            "jobType": "JOB",
        }
    }

    def event(kind: str, when: str, run: str, outputs: bool, job: str = "") -> dict[str, Any]:
        e = copy.deepcopy(start if kind == "START" else complete)
        e["eventType"], e["eventTime"] = kind, when
        e["run"]["runId"] = run
        e["outputs"] = [{**output, "facets": {**output["facets"], "schema": schema}}] * outputs
        if job:
            e["job"]["name"] = job
            e["job"]["facets"] = streaming
        return e

    failed, aborted = "0191a500-0000-7000-8000-00000000000f", "0191a500-0000-7000-8000-00000000000a"
    quiet, stream = "0191a500-0000-7000-8000-00000000000c", "0191a500-0000-7000-8000-00000000005e"
    return [
        event("START", "2026-09-03T10:00:00Z", failed, True),
        event("FAIL", "2026-09-03T10:03:00Z", failed, True),
        event("START", "2026-09-03T11:00:00Z", aborted, True),
        event("ABORT", "2026-09-03T11:01:00Z", aborted, False),
        event("START", "2026-09-04T10:00:00Z", quiet, True),
        event("COMPLETE", "2026-09-04T10:02:00Z", quiet, False),
        event("START", "2026-09-05T00:00:00Z", stream, False, "orders_stream"),
        event("RUNNING", "2026-09-05T01:00:00Z", stream, True, "orders_stream"),
        event("RUNNING", "2026-09-05T02:00:00Z", stream, True, "orders_stream"),
        event("FAIL", "2026-09-05T02:30:00Z", stream, True, "orders_stream"),
    ]


EVENTS = [e for s in SCENARIOS for e in conformance_events(f"scenarios/{s}")] + write_events()

_counter = itertools.count()


def semantic_view(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """What must not depend on arrival order (log positions and the ids of datasets,
    which follow log order by design, left out)."""
    q = conn.execute
    view: dict[str, Any] = {
        "runs": sorted(
            q(
                "SELECT id, job_id, state, state_time, started_at, ended_at, nominal_start, "
                "nominal_end, error_message, parent_run_id, root_run_id, facets, first_seen, "
                "last_seen FROM readmodel.runs"
            ).fetchall(),
            key=str,
        ),
        "jobs": sorted(
            q(
                "SELECT id, namespace, name, facets, job_type, processing_type, integration, "
                "parent_job_id, first_seen, last_seen, latest_run_id FROM readmodel.jobs"
            ).fetchall(),
            key=str,
        ),
        "namespaces": sorted(q("SELECT * FROM readmodel.namespaces").fetchall()),
        "run_edges": sorted(q("SELECT * FROM readmodel.run_edges").fetchall(), key=str),
        "job_edges": sorted(q("SELECT * FROM readmodel.job_edges").fetchall(), key=str),
        "lineage_runs": sorted(
            q(
                "SELECT run_id, job_id, started_at, ended_at, has_start, first_complete, "
                "last_complete, failed_at, failed_state, ended_state FROM readmodel.lineage_runs"
            ).fetchall(),
            key=str,
        ),
        "schema_observations": sorted(
            q(
                "SELECT namespace, name, role, event_time, fields_hash, run_id "
                "FROM readmodel.schema_observations"
            ).fetchall(),
            key=str,
        ),
        # (by report: each pair is in the pairs of the reports its output was sent)
        "column_lineage": sorted(
            q(
                "SELECT c.out_namespace, c.out_name, r.pairs::text, c.first_seen, c.last_seen, "
                "ARRAY(SELECT unnest(c.job_ids)::text ORDER BY 1) FROM readmodel.column_lineage c "
                "JOIN readmodel.column_reports r ON r.report = c.report"
            ).fetchall(),
            key=str,
        ),
        # A dataset is the set of its names, with what we know about it.
        "datasets": sorted(
            q(
                "SELECT array_agg(n.namespace || ' ' || n.name || ' ' || n.kind || ' ' || "
                "coalesce(n.joined_by::text, '') ORDER BY n.namespace, n.name), "
                "d.facets, d.first_seen, d.last_seen, "
                "(SELECT array_agg(encode(v.fields_hash, 'hex') || v.event_time::text || "
                "        v.last_event_time::text ORDER BY v.fields_hash) "
                " FROM readmodel.dataset_versions v WHERE v.dataset_id = d.id) "
                "FROM readmodel.datasets d JOIN readmodel.dataset_names n ON n.dataset_id = d.id "
                "WHERE d.merged_into IS NULL GROUP BY d.id"
            ).fetchall(),
            key=str,
        ),
    }
    return view


@pytest.fixture(scope="module")
def fresh_database(pg_server: Server, template_db: str) -> Iterator[Any]:
    """A factory of fresh databases (template copies), dropped at the end of the module."""
    janitors = []

    def make() -> str:
        name = f"p_{os.getpid()}_{next(_counter)}"
        janitor = pg_server.janitor(name, template_dbname=template_db)
        janitor.init()
        janitors.append(janitor)
        return pg_server.url(name)

    yield make
    for janitor in janitors:
        janitor.drop()


# The seed's Trino names joined to their Hive names by a catalog map.
CATALOGS = parse_catalog_map(
    "catalogs:\n  - engine: 'trino://trino-coordinator-*:8443'\n    catalog: lakehouse\n"
    "    metastore: 'hive://hive-metastore:9083'\n",
    "catalogs.yaml",
)


def folded_view(url: str, catalogs: CatalogMap) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        append(conn, EVENTS)
        catch_up(conn, catalogs=catalogs)
        return semantic_view(conn)


@pytest.fixture(scope="module")
def baseline(fresh_database: Any) -> dict[str, Any]:
    return folded_view(fresh_database(), NO_CATALOGS)


@pytest.fixture(scope="module")
def baseline_with_map(fresh_database: Any) -> dict[str, Any]:
    return folded_view(fresh_database(), CATALOGS)


arrivals = st.permutations(range(len(EVENTS))).flatmap(
    lambda order: st.tuples(
        st.just(order),
        st.lists(st.sampled_from(range(len(EVENTS))), max_size=15),  # duplicates
        st.lists(st.integers(1, len(EVENTS)), min_size=1, max_size=6),  # transaction sizes
        st.sampled_from([1, 3, 50, 2000]),  # batch size
    )
)
Arrival = tuple[list[int], list[int], list[int], int]


def any_arrival(examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The test run on `examples` generated arrivals, each given the same fixtures."""
    return lambda test: settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )(given(arrival=arrivals)(test))


def check_arrival(
    arrival: Arrival, url: str, baseline: dict[str, Any], catalogs: CatalogMap
) -> None:
    order, duplicates, chunk_sizes, batch_size = arrival
    sequence = [EVENTS[i] for i in order]
    for position, i in enumerate(duplicates):
        sequence.insert((position * 7) % (len(sequence) + 1), EVENTS[i])
    with psycopg.connect(url, autocommit=True) as conn:
        start = 0
        for size in itertools.cycle(chunk_sizes):
            if start >= len(sequence):
                break
            append(conn, sequence[start : start + size])
            catch_up(conn, limit=batch_size, catalogs=catalogs)  # as the log grows, in steps
            start += size
        incremental = dump_readmodel(conn)
        assert semantic_view(conn) == baseline
        rebuild(url, [p.NAME for p in PROJECTIONS], catalogs=catalogs)
        assert dump_readmodel(conn) == incremental


@any_arrival(25)
def test_any_arrival_order_gives_the_same_read_models(
    arrival: Arrival, fresh_database: Any, baseline: dict[str, Any]
) -> None:
    check_arrival(arrival, fresh_database(), baseline, NO_CATALOGS)


@any_arrival(8)
def test_with_a_catalog_map_any_arrival_order_gives_the_same_read_models(
    arrival: Arrival, fresh_database: Any, baseline_with_map: dict[str, Any]
) -> None:
    check_arrival(arrival, fresh_database(), baseline_with_map, CATALOGS)
