"""The real openlineage-python client, configured as emitters configure it, delivers events."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import psycopg
from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import parent_run, schema_dataset

from metastore.eventlog import START, read_events_after
from tests.emitter import openlineage_client
from tests.support import running

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"


def test_the_python_client_delivers_run_job_and_dataset_events(
    database_url: str, tmp_path: Path
) -> None:
    with running("api", database_url, tmp_path) as api:
        client = openlineage_client(
            api.base_url, "an-ingest-token", endpoint="ingest/openlineage", compression="gzip"
        )
        now = dt.datetime.now(dt.UTC).isoformat()
        parent_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
        job = Job(namespace="airflow", name="orders_daily.load")
        orders = InputDataset(
            namespace="s3a://warehouse",
            name="raw/orders",
            facets={
                "schema": schema_dataset.SchemaDatasetFacet(
                    fields=[schema_dataset.SchemaDatasetFacetFields(name="id", type="bigint")]
                )
            },
        )
        parent = parent_run.ParentRunFacet(
            run=parent_run.Run(runId=parent_id),
            job=parent_run.Job(namespace="airflow", name="orders_daily"),
        )
        events: list[RunEvent | JobEvent | DatasetEvent] = [
            RunEvent(
                eventType=RunState.START,
                eventTime=now,
                run=Run(runId=run_id, facets={"parent": parent}),
                job=job,
                inputs=[orders],
                outputs=[OutputDataset(namespace="s3a://warehouse", name="sales.db/orders")],
                producer=PRODUCER,
            ),
            RunEvent(
                eventType=RunState.COMPLETE,
                eventTime=now,
                run=Run(runId=run_id),
                job=job,
                producer=PRODUCER,
            ),
            JobEvent(eventTime=now, job=job, inputs=[orders], producer=PRODUCER),
            DatasetEvent(
                eventTime=now,
                dataset=StaticDataset(namespace="s3a://warehouse", name="raw/orders"),
                producer=PRODUCER,
            ),
        ]
        for event in events:
            client.emit(event)  # raises on a 4xx/5xx answer
        client.close()

    with psycopg.connect(database_url) as conn:
        stored = read_events_after(conn, START, 100)
    assert [(e.kind, e.event_type, e.run_id) for e in stored] == [
        ("run", "START", uuid.UUID(run_id)),
        ("run", "COMPLETE", uuid.UUID(run_id)),
        ("job", None, None),
        ("dataset", None, None),
    ]
    assert {(e.job_namespace, e.job_name) for e in stored[:3]} == {("airflow", "orders_daily.load")}
    start = stored[0].event
    assert start["run"]["facets"]["parent"]["run"]["runId"] == parent_id
    (field,) = start["inputs"][0]["facets"]["schema"]["fields"]
    assert (field["name"], field["type"]) == ("id", "bigint")
    dataset = stored[3].event["dataset"]
    assert (dataset["namespace"], dataset["name"]) == ("s3a://warehouse", "raw/orders")
