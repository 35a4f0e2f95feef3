"""A deterministic generator of OpenLineage events shaped like the conformance scenarios.

The lineage graph: datasets in layers, each task job reading 1-4 datasets of one layer
(fan-in) and writing 1-2 of the next (a dataset is read by about two jobs: fan-out, and
some are written by two: fan-in). Task jobs belong to applications: Spark applications
(namespace `spark-prod`, child query jobs `<app>.execute_<command>.<table>`, like
`scenarios/spark_dataproc_*`) and Airflow DAGs (namespace `airflow-prod`, tasks
`<dag>.<task>`, like `scenarios/airflow`). Each application run is START, then for each
task a child run (parent facet) with START, RUNNING, COMPLETE (one in 25 FAIL), then the
application's COMPLETE. Facets are the ones those producers send (spark_properties,
processing_engine, jobType, sql, airflow, dataSource, schema, symlinks, columnLineage,
outputStatistics), so Spark events are about 3 KB like the corpus's.

Everything follows from the seed and the sizes: the same arguments give the same bytes.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from metastore.eventlog import LogRecord

SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
SPARK_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
AIRFLOW_PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/1.14.0"
FACETS = "https://openlineage.io/spec/facets/"
START_TIME = dt.datetime(2024, 10, 1, tzinfo=dt.UTC)
LAYERS = 12

FIELD_NAMES = (
    "id",
    "customer_id",
    "order_id",
    "amount",
    "currency",
    "created_at",
    "updated_at",
    "country",
    "status",
    "sku",
    "quantity",
    "unit_price",
    "discount",
    "region",
    "channel",
    "event_date",
    "store_id",
    "payment_type",
    "tax",
    "shipping_cost",
)
FIELD_TYPES = (
    "bigint",
    "string",
    "string",
    "decimal(18,2)",
    "string",
    "timestamp",
    "timestamp",
    "string",
    "string",
    "string",
    "integer",
    "decimal(18,2)",
    "decimal(5,2)",
    "string",
    "string",
    "date",
    "integer",
    "string",
    "decimal(18,2)",
    "decimal(18,2)",
)
SPARK_COMMANDS = (
    "execute_insert_into_hadoop_fs_relation_command",
    "execute_create_data_source_table_as_select_command",
    "execute_insert_into_hive_table",
    "execute_merge_into_command",
)
AIRFLOW_OPERATORS = (
    "BigQueryInsertJobOperator",
    "SparkSubmitOperator",
    "GCSToBigQueryOperator",
    "TrinoOperator",
    "PythonOperator",
)

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class Dataset:
    namespace: str
    name: str
    fields: tuple[str, ...]
    symlink: tuple[str, str] | None  # (namespace, name) of a Hive table name, for s3a ones


@dataclass
class Task:
    app: int
    namespace: str
    name: str
    inputs: list[int]
    outputs: list[int]


@dataclass
class App:
    flavor: str  # "spark" | "airflow"
    namespace: str
    name: str
    tasks: list[int] = field(default_factory=list)


@dataclass
class Graph:
    datasets: list[Dataset]
    tasks: list[Task]
    apps: list[App]

    @property
    def n_jobs(self) -> int:
        return len(self.tasks) + len(self.apps)

    def edges(self) -> list[tuple[int, int]]:
        """(source, target) node ids: datasets 0..D-1, task jobs D.. (input -> job -> output)."""
        base = len(self.datasets)
        out: list[tuple[int, int]] = []
        for t, task in enumerate(self.tasks):
            out += [(d, base + t) for d in task.inputs]
            out += [(base + t, d) for d in task.outputs]
        return out


def _dataset(rng: random.Random, d: int, layer: int) -> Dataset:
    n_fields = rng.randint(3, 9)
    fields = tuple(FIELD_NAMES[(d + k * 7) % len(FIELD_NAMES)] for k in range(n_fields))
    fields = tuple(dict.fromkeys(fields))
    table = f"t{layer:02d}_{d:06d}"
    match d % 3:
        case 0:
            db = ("raw", "staging", "sales", "finance", "marketing")[d % 5]
            return Dataset(
                "s3a://warehouse",
                f"{db}.db/{table}",
                fields,
                ("hive://hive-metastore:9083", f"{db}.{table}"),
            )
        case 1:
            return Dataset("bigquery", f"analytics-prod.layer{layer:02d}.{table}", fields, None)
        case _:
            return Dataset("hdfs://namenode:8020", f"/user/hive/warehouse/{table}", fields, None)


def build_graph(nodes: int, seed: int) -> Graph:
    """About `nodes` datasets and jobs (half each), in LAYERS layers, deterministic."""
    rng = random.Random(seed)
    n_datasets = max(LAYERS * 2, nodes // 2)
    n_jobs = max(LAYERS, nodes - n_datasets)
    n_apps = max(1, n_jobs // 11)
    n_tasks = n_jobs - n_apps
    layer_start = [n_datasets * k // LAYERS for k in range(LAYERS + 1)]

    def layer_of(d: int) -> int:
        return next(k for k in range(LAYERS) if layer_start[k + 1] > d)

    datasets = [_dataset(rng, d, d * LAYERS // n_datasets) for d in range(n_datasets)]
    apps: list[App] = []
    for a in range(n_apps):
        if a % 2 == 0:
            apps.append(App("spark", "spark-prod", f"spark_app_{a:05d}"))
        else:
            apps.append(App("airflow", "airflow-prod", f"dag_{a:05d}"))
    tasks: list[Task] = []
    written = n_datasets - layer_start[1]
    for t in range(n_tasks):
        # Primary outputs sweep layers 1.. so every one of them has a writer.
        out = layer_start[1] + t * written // n_tasks
        layer = layer_of(out)
        outputs = [out]
        if rng.random() < 0.3 and out + 1 < layer_start[layer + 1]:
            outputs.append(out + 1)  # written by this job and its neighbour: fan-in
        lo, hi = layer_start[layer - 1], layer_start[layer]
        rel = (out - layer_start[layer]) / max(1, layer_start[layer + 1] - layer_start[layer])
        mirror = lo + int(rel * (hi - lo))
        inputs = [min(mirror, hi - 1)]
        for _ in range(min(3, int(rng.expovariate(1.0)))):
            inputs.append(min(hi - 1, max(lo, mirror + rng.randint(-20, 20))))
        inputs = list(dict.fromkeys(inputs))
        a = t % n_apps
        app = apps[a]
        table = datasets[out].name.rsplit("/", 1)[-1].rsplit(".", 1)[-1]
        if app.flavor == "spark":
            name = f"{app.name}.{SPARK_COMMANDS[t % len(SPARK_COMMANDS)]}.{table}"
        else:
            name = f"{app.name}.load_{table}"
        app.tasks.append(t)
        tasks.append(Task(a, app.namespace, name, inputs, outputs))
    return Graph(datasets, tasks, apps)


def _facet(spec: str, **body: Any) -> dict[str, Any]:
    producer = (
        AIRFLOW_PRODUCER if "Airflow" in spec or spec.startswith("airflow") else (SPARK_PRODUCER)
    )
    return {"_producer": producer, "_schemaURL": FACETS + spec, **body}


def _schema(ds: Dataset) -> dict[str, Any]:
    types = {name: FIELD_TYPES[FIELD_NAMES.index(name)] for name in ds.fields}
    return _facet(
        "1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
        fields=[{"name": n, "type": types[n]} for n in ds.fields],
    )


def _dataset_ref(ds: Dataset, full: bool) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if full:
        facets["dataSource"] = _facet(
            "1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
            name=ds.namespace,
            uri=ds.namespace,
        )
        facets["schema"] = _schema(ds)
        if ds.symlink is not None:
            facets["symlinks"] = _facet(
                "1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
                identifiers=[{"namespace": ds.symlink[0], "name": ds.symlink[1], "type": "TABLE"}],
            )
    return {"namespace": ds.namespace, "name": ds.name, "facets": facets}


def _column_lineage(out: Dataset, inputs: list[Dataset]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in out.fields:
        sources = [ds for ds in inputs if name in ds.fields] or inputs[:1]
        fields[name] = {
            "inputFields": [
                {
                    "namespace": ds.namespace,
                    "name": ds.name,
                    "field": name if name in ds.fields else ds.fields[0],
                    "transformations": [
                        {
                            "type": "DIRECT",
                            "subtype": "IDENTITY",
                            "description": "",
                            "masking": False,
                        }
                    ],
                }
                for ds in sources[:1]
            ]
        }
    return _facet(
        "1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet", fields=fields
    )


class Generator:
    """Turns a graph into the stream of events its applications emit, run after run."""

    def __init__(self, graph: Graph, seed: int) -> None:
        self.graph = graph
        self.rng = random.Random(seed + 1)
        self.clock = START_TIME
        self.emitted = 0

    def _uuid(self) -> uuid.UUID:
        # uuid7-shaped (time-ordered, like the Spark integration's) and deterministic.
        millis = int(self.clock.timestamp() * 1000)
        rand = self.rng.getrandbits(74)
        value = (
            (millis << 80)
            | (0x7 << 76)
            | ((rand >> 62) << 64)
            | (0b10 << 62)
            | (rand & ((1 << 62) - 1))
        )
        return uuid.UUID(int=value)

    def _tick(self, seconds: float) -> str:
        self.clock += dt.timedelta(seconds=seconds)
        return self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def events(self, limit: int) -> Iterator[bytes]:
        """The first `limit` events, as JSON bytes, in emission order."""
        round_no = 0
        while True:
            for a in range(len(self.graph.apps)):
                for event in self._app_run(a, round_no):
                    if self.emitted >= limit:
                        return
                    self.emitted += 1
                    yield _encoder.encode(event)
            round_no += 1

    def _app_run(self, a: int, round_no: int) -> Iterator[dict[str, Any]]:
        app = self.graph.apps[a]
        run_id = str(self._uuid())
        producer = SPARK_PRODUCER if app.flavor == "spark" else AIRFLOW_PRODUCER
        job_type = ("APPLICATION", "SPARK") if app.flavor == "spark" else ("DAG", "AIRFLOW")
        app_job = {
            "namespace": app.namespace,
            "name": app.name,
            "facets": {
                "jobType": _facet(
                    "2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
                    processingType="BATCH",
                    integration=job_type[1],
                    jobType=job_type[0],
                )
            },
        }
        run_facets = self._app_run_facets(app, round_no)
        yield _run_event(
            self._tick(1),
            producer,
            "START",
            run_id,
            run_facets,
            app_job,
            [],
            [],
        )
        parent = _facet(
            "1-0-1/ParentRunFacet.json#/$defs/ParentRunFacet",
            run={"runId": run_id},
            job={"namespace": app.namespace, "name": app.name},
        )
        for t in app.tasks:
            yield from self._task_run(t, app, parent, round_no)
        yield _run_event(
            self._tick(2),
            producer,
            "COMPLETE",
            run_id,
            {},
            {"namespace": app.namespace, "name": app.name, "facets": {}},
            [],
            [],
        )

    def _app_run_facets(self, app: App, round_no: int) -> dict[str, Any]:
        if app.flavor == "spark":
            return _spark_run_facets(app.name)
        return {
            "airflowDagRun": _facet(
                "1-0-0/AirflowDagRunFacet.json",
                dag={"dag_id": app.name, "owner": "data-eng", "schedule_interval": "@daily"},
                dagRun={
                    "dag_id": app.name,
                    "run_id": f"scheduled__round_{round_no:04d}",
                    "run_type": "scheduled",
                },
            )
        }

    def _task_run(
        self, t: int, app: App, parent: dict[str, Any], round_no: int
    ) -> Iterator[dict[str, Any]]:
        task = self.graph.tasks[t]
        datasets = self.graph.datasets
        inputs = [datasets[d] for d in task.inputs]
        outputs = [datasets[d] for d in task.outputs]
        run_id = str(self._uuid())
        spark = app.flavor == "spark"
        producer = SPARK_PRODUCER if spark else AIRFLOW_PRODUCER
        if spark:
            run_facets = {"parent": parent, **_spark_run_facets(app.name)}
            columns = ", ".join(outputs[0].fields)
            sources = " JOIN ".join(ds.name for ds in inputs)
            job_facets = {
                "jobType": _facet(
                    "2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
                    processingType="BATCH",
                    integration="SPARK",
                    jobType="SQL_JOB",
                ),
                "sql": _facet(
                    "1-0-1/SQLJobFacet.json#/$defs/SQLJobFacet",
                    query=f"INSERT INTO {outputs[0].name} SELECT {columns} FROM {sources}",
                ),
            }
        else:
            operator = AIRFLOW_OPERATORS[t % len(AIRFLOW_OPERATORS)]
            run_facets = {
                "parent": parent,
                "airflow": _facet(
                    "1-0-0/AirflowRunFacet.json",
                    dag={"dag_id": app.name, "owner": "data-eng"},
                    task={
                        "task_id": task.name.split(".", 1)[1],
                        "operator_class": operator,
                        "retries": 2,
                        "owner": "data-eng",
                    },
                    taskInstance={"try_number": 1, "pool": "default_pool"},
                    taskUuid=str(self._uuid()),
                ),
                "processing_engine": _facet(
                    "1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
                    version="2.10.2",
                    name="Airflow",
                    openlineageAdapterVersion="1.14.0",
                ),
            }
            job_facets = {
                "jobType": _facet(
                    "2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
                    processingType="BATCH",
                    integration="AIRFLOW",
                    jobType="TASK",
                )
            }
        job = {"namespace": task.namespace, "name": task.name}
        yield _run_event(
            self._tick(0.5),
            producer,
            "START",
            run_id,
            run_facets,
            {**job, "facets": job_facets},
            [_dataset_ref(ds, True) for ds in inputs],
            [_dataset_ref(ds, True) for ds in outputs],
        )
        yield _run_event(
            self._tick(self.rng.uniform(5, 60)),
            producer,
            "RUNNING",
            run_id,
            {"parent": parent},
            {**job, "facets": {}},
            [_dataset_ref(ds, False) for ds in inputs],
            [_dataset_ref(ds, False) for ds in outputs],
        )
        failed = self.rng.random() < 0.04
        end_outputs = []
        for ds in outputs:
            ref = _dataset_ref(ds, True)
            if not failed:
                ref["facets"]["columnLineage"] = _column_lineage(ds, inputs)
                ref["outputFacets"] = {
                    "outputStatistics": _facet(
                        "1-0-2/OutputStatisticsOutputDatasetFacet.json"
                        "#/$defs/OutputStatisticsOutputDatasetFacet",
                        rowCount=self.rng.randint(1_000, 50_000_000),
                        size=self.rng.randint(10_000, 9_000_000_000),
                    )
                }
            end_outputs.append(ref)
        end_facets: dict[str, Any] = {"parent": parent}
        if failed:
            end_facets["errorMessage"] = _facet(
                "1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
                message=f"Job aborted due to stage failure in round {round_no}",
                programmingLanguage="JAVA" if spark else "PYTHON",
            )
        yield _run_event(
            self._tick(self.rng.uniform(10, 300)),
            producer,
            "FAIL" if failed else "COMPLETE",
            run_id,
            end_facets,
            {**job, "facets": {}},
            [_dataset_ref(ds, False) for ds in inputs],
            end_outputs,
        )


def _run_event(
    event_time: str,
    producer: str,
    event_type: str,
    run_id: str,
    run_facets: dict[str, Any],
    job: dict[str, Any],
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
) -> dict[str, Any]:
    """A run event as the integrations send it (the keys in their order)."""
    return dict(
        eventTime=event_time,
        producer=producer,
        schemaURL=SCHEMA_URL,
        eventType=event_type,
        run={"runId": run_id, "facets": run_facets},
        job=job,
        inputs=inputs,
        outputs=outputs,
    )


def _spark_run_facets(app_name: str) -> dict[str, Any]:
    """What the Spark integration puts on each run of an application (and its tasks)."""
    return {
        "spark_properties": _facet(
            "2-0-2/OpenLineage.json#/$defs/RunFacet",
            properties={
                "spark.master": "k8s://https://kubernetes.default.svc",
                "spark.app.name": app_name,
            },
        ),
        "processing_engine": _facet(
            "1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
            version="3.5.1",
            name="spark",
            openlineageAdapterVersion="1.23.0",
        ),
    }


def events(nodes: int, limit: int, seed: int) -> Iterator[bytes]:
    """The first `limit` events of the workload over a graph of about `nodes` nodes."""
    return Generator(build_graph(nodes, seed), seed).events(limit)


def to_record(body: bytes) -> LogRecord:
    """The log record ingest would make of this event (same envelope code, same digest)."""
    from metastore.envelope import parse_event

    return parse_event(body)


def spark_event_template() -> tuple[bytes, bytes]:
    """A ~3 KB Spark COMPLETE event split around its runId's last 12 hex digits.

    The load generators put a counter there so that every request is a distinct event
    (an exact repeat would only hit the dedup path).
    """
    gen = Generator(build_graph(1_000, 7), 7)
    candidates = []
    for body in gen.events(500):
        event = msgspec.json.decode(body)
        if (
            event["eventType"] == "COMPLETE"
            and event["producer"] == SPARK_PRODUCER
            and (event["outputs"])
        ):
            candidates.append((abs(len(body) - 3072), body, event["run"]["runId"]))
    _, body, run_id = min(candidates)
    marker = run_id[:-12]
    text = body.replace(run_id.encode(), (marker + "#" * 12).encode(), 1)
    head, _, tail = text.partition(b"#" * 12)
    assert b"#" * 12 not in tail and head.endswith(marker.encode())
    return head, tail


def body_with_id(head: bytes, tail: bytes, n: int) -> bytes:
    return head + f"{n:012x}".encode() + tail
