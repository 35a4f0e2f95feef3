"""The stores that made reads slow, their answers large, or invalid (issue 35), as events.

Each function yields OpenLineage events (dicts) of one case, deterministic from its
arguments; `bench/fig_bounded.py` times the reads over them and the crawl test
(tests/test_crawl.py) walks them at small sizes:

- `many_names`: a dataset with `names` + 1 names (a Spark output whose `symlinks` facet
  lists `names` identifiers, about 60 bytes each), written by one job and read by another
  that derives fields from it (column lineage downstream), over `runs` runs each.
- `wide`: one event whose output has `fields` fields (schema and columnLineage), each
  derived from the input's field of the same name: 300 KB at 3,000 fields.
- `trino`: `queries` Trino queries, each a job of its own (Trino names a job by its query
  id), reading one table and writing another with the same `fields`-field column lineage.
- `malformed_parts`: a schema whose fields and a columnLineage whose transformations
  break their schema in every way a member can (nested too).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACETS = "https://openlineage.io/spec/facets/"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
TRINO = "https://github.com/trinodb/trino/plugin/trino-openlineage"
START = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)

# The names the cases use (bench/fig_bounded.py and the crawl look their datasets up by them).
MANY_NAMES = ("s3a://lake", "wide.db/orders")
MANY_NAMES_DERIVED = ("s3a://lake", "wide.db/orders_summary")
WIDE = ("s3a://lake", "wide.db/three_thousand")
WIDE_SOURCE = ("s3a://lake", "wide.db/three_thousand_raw")
TRINO_NAMESPACE = "trino://trino-coordinator:8080"
TRINO_SOURCE = (TRINO_NAMESPACE, "lakehouse.sales.orders")
TRINO_TARGET = (TRINO_NAMESPACE, "lakehouse.sales.orders_daily")
MALFORMED = ("s3a://lake", "careless.db/parts")


def _facet(spec: str, **body: Any) -> dict[str, Any]:
    return {"_producer": SPARK, "_schemaURL": FACETS + spec, **body}


def _time(seconds: float) -> str:
    return (START + dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _run_id(case: str, n: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-bench/{case}/{n}"))


def _schema(fields: list[str]) -> dict[str, Any]:
    return _facet(
        "1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
        fields=[{"name": f, "type": "string"} for f in fields],
    )


def _column_lineage(source: tuple[str, str], fields: list[str]) -> dict[str, Any]:
    direct = [{"type": "DIRECT", "subtype": "IDENTITY", "description": "", "masking": False}]
    return _facet(
        "1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
        fields={
            f: {
                "inputFields": [
                    {
                        "namespace": source[0],
                        "name": source[1],
                        "field": f,
                        "transformations": direct,
                    }
                ]
            }
            for f in fields
        },
    )


def _event(
    event_type: str,
    when: float,
    run_id: str,
    job: tuple[str, str],
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    producer: str = SPARK,
) -> dict[str, Any]:
    return {
        "eventType": event_type,
        "eventTime": _time(when),
        "producer": producer,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run_id, "facets": {}},
        "job": {"namespace": job[0], "name": job[1], "facets": {}},
        "inputs": inputs,
        "outputs": outputs,
    }


def _dataset(name: tuple[str, str], **facets: Any) -> dict[str, Any]:
    return {"namespace": name[0], "name": name[1], "facets": facets}


def many_names(names: int = 2_000, runs: int = 200, fields: int = 20) -> Iterator[dict[str, Any]]:
    """The writer's first event carries the symlinks facet; every run reads or writes."""
    columns = [f"c{k:02d}" for k in range(fields)]
    symlinks = _facet(
        "1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
        identifiers=[
            {"namespace": "hive://hive-metastore:9083", "name": f"alias.orders_{k:05d}", "type": ""}
            for k in range(names)
        ],
    )
    for n in range(runs):
        t = n * 60.0
        facets: dict[str, Any] = {"schema": _schema(columns)}
        if n == 0:
            facets["symlinks"] = symlinks
        written = _dataset(MANY_NAMES, **facets)
        writer = ("spark-prod", "wide_orders_writer")
        yield _event("START", t, _run_id("names-w", n), writer, [], [written])
        yield _event("COMPLETE", t + 10, _run_id("names-w", n), writer, [], [written])
        derived = _dataset(MANY_NAMES_DERIVED, columnLineage=_column_lineage(MANY_NAMES, columns))
        reader = ("spark-prod", "wide_orders_summary")
        read = _dataset(MANY_NAMES)
        yield _event("START", t + 20, _run_id("names-r", n), reader, [read], [])
        yield _event("COMPLETE", t + 30, _run_id("names-r", n), reader, [read], [derived])


def wide(fields: int = 3_000) -> Iterator[dict[str, Any]]:
    columns = [f"column_{k:05d}" for k in range(fields)]
    source = _dataset(WIDE_SOURCE, schema=_schema(columns))
    target = _dataset(
        WIDE, schema=_schema(columns), columnLineage=_column_lineage(WIDE_SOURCE, columns)
    )
    job = ("spark-prod", "wide_table_copy")
    yield _event("COMPLETE", 3600.0, _run_id("wide", 0), job, [source], [target])


def trino(queries: int = 20_000, fields: int = 20) -> Iterator[dict[str, Any]]:
    """START and COMPLETE of each query, one second apart, a query every 2 seconds."""
    columns = [f"col_{k:02d}" for k in range(fields)]
    source = _dataset(TRINO_SOURCE, schema=_schema(columns))
    target = _dataset(
        TRINO_TARGET, schema=_schema(columns), columnLineage=_column_lineage(TRINO_SOURCE, columns)
    )
    for n in range(queries):
        t = 7200.0 + n * 2
        job = (TRINO_NAMESPACE, f"20250301_{n // 1000:06d}_{n % 1000:05d}_qryid")
        run = _run_id("trino", n)
        yield _event("START", t, run, job, [source], [], producer=TRINO)
        yield _event("COMPLETE", t + 1, run, job, [source], [target], producer=TRINO)


def malformed_parts() -> Iterator[dict[str, Any]]:
    """Members of the wrong type at every level of a schema and of transformations."""
    fields: list[Any] = [
        1,
        None,
        "x",
        {"name": 5},
        {"name": "ok", "type": "string"},
        {"name": "nested", "type": "struct", "fields": [{"name": 6}, {"name": "inner"}, 7]},
        {"name": "bad_type", "type": {"a": 1}, "description": ["no"]},
    ]
    lineage = _facet(
        "1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
        fields={
            "ok": {
                "inputFields": [
                    {
                        "namespace": MALFORMED[0],
                        "name": MALFORMED[1] + "_src",
                        "field": "ok",
                        "transformations": [
                            {"type": 1, "description": {"a": 1}, "masking": "yes"},
                            {"type": "DIRECT", "subtype": "IDENTITY", "masking": False},
                        ],
                    }
                ]
            }
        },
    )
    target = _dataset(
        MALFORMED,
        schema=_facet("1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet", fields=fields),
        columnLineage=lineage,
    )
    source = _dataset((MALFORMED[0], MALFORMED[1] + "_src"))
    job = ("spark-prod", "careless_parts")
    yield _event("COMPLETE", 600.0, _run_id("malformed", 0), job, [source], [target])
