"""A year of a data platform's lineage: the corpus of the scale benchmark (make bench-scale).

What a Stackable platform's producers send over a year, interleaved as concurrent runs are:

- **Spark** applications (`spark-prod`): the application run (START, COMPLETE, one in 100
  ABORT), a child run per SQL query (`<app>.execute_<command>.<table>`: START, 0-2
  RUNNING, COMPLETE or FAIL) reading and writing lakehouse tables by their S3 location
  with a `symlinks` facet naming the Hive table, `columnLineage` and `outputStatistics` on
  the outputs of a COMPLETE. The applications that enable `spark.logicalPlan` send it on
  their queries' START and COMPLETE: 50-500 KB (log-uniform per query), shaped like the
  plans in the conformance corpus (scenarios/CLL), names and ids varied per query and run.
- **Trino** queries (`prod-lineage`, the job name is the query id, as the Trino listener
  names them): START and COMPLETE (one in 12 FAIL), the SQL, tables named
  `lakehouse.<schema>.<table>` under the coordinator's namespace. A catalog map entry
  (`catalogs_yaml`) joins the production cluster's names to the Hive names; the ad-hoc
  cluster's datasets carry a `catalog` facet that does the same. Three in five are
  CREATE TABLE AS into a fresh scratch table (with column lineage).
- **dbt** projects run by `dbt-ol` against Trino: a parent run per invocation and a run per
  model (START, COMPLETE or FAIL) with the compiled SQL and column lineage.
- **Airflow** DAGs: the DAG run and a child run per task (START, COMPLETE or FAIL and a
  retry); ingestion tasks read a new landing file each run and write a raw table.

The graph is implicit, so memory stays flat however many events are asked for: pipelines
(a Spark application, a DAG, a dbt project) appear at a steady rate over the year, each
with up to 8 job slots; job slot j writes table slots 3j (and 3j+1), reads 1-4 tables of
earlier pipelines; a table slot no job writes is an external source (PostgreSQL, Kafka, a
lakehouse table loaded from outside). Everything is a function of the seed and the event
count: the first n events of a larger corpus are the corpus of n events.
"""

from __future__ import annotations

import datetime as dt
import functools
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

CATALYST = "org.apache.spark.sql.catalyst."
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACETS = "https://openlineage.io/spec/facets/"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
AIRFLOW = "https://github.com/apache/airflow/tree/providers-openlineage/1.14.0"
TRINO = "https://github.com/trinodb/trino/plugin/trino-openlineage/468"
DBT = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/dbt"

START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
YEAR_EVENTS = 5_000_000  # the pace: this many events make the year
MEAN_GAP_S = 365 * 86_400 / YEAR_EVENTS
CONCURRENT = 8  # workloads in flight at once (their events interleave)

BASE_PIPELINES = 200
PIPELINES_PER_EVENT = 0.004  # 20,200 pipelines (about 100,000 jobs) at 5,000,000 events
SLOTS = 8  # job slots per pipeline
PLAN_APPS_PERCENT = 7  # Spark applications that send spark.logicalPlan
PLAN_MIN, PLAN_MAX = 50_000, 500_000

LAKEHOUSE = "s3a://lakehouse"
HIVE = "hive://hive-metastore:9083"
HDFS = "hdfs://namenode:8020"
POSTGRES = "postgres://postgres-oltp:5432"
KAFKA = "kafka://kafka-broker-default-0.kafka-broker-default.prod.svc.cluster.local:9092"
TRINO_PROD = (
    "trino://trino-coordinator-default-0.trino-coordinator-default.prod.svc.cluster.local:8443"
)
TRINO_ADHOC = "trino://trino-adhoc-coordinator-default-0.trino-adhoc-coordinator-default.prod.svc.cluster.local:8443"


def catalogs_yaml() -> str:
    """The catalog map the store runs with (METASTORE_CATALOGS_FILE): the production Trino
    cluster's `lakehouse` and `hive` catalogs are the Hive metastore's tables."""
    return (
        "catalogs:\n"
        f'  - engine: "trino://trino-coordinator-default-*:8443"\n'
        f"    catalog: lakehouse\n    metastore: {HIVE}\n"
        f'  - engine: "trino://trino-coordinator-default-*:8443"\n'
        f"    catalog: hive\n    metastore: {HIVE}\n"
    )


WORDS = [
    "order",
    "customer",
    "product",
    "invoice",
    "payment",
    "shipment",
    "account",
    "session",
    "click",
    "view",
    "cart",
    "refund",
    "vendor",
    "store",
    "region",
    "campaign",
    "ledger",
    "balance",
    "inventory",
    "supplier",
    "contract",
    "claim",
    "policy",
    "device",
    "sensor",
    "reading",
    "alert",
    "ticket",
    "agent",
    "call",
    "subscription",
    "plan",
    "usage",
    "tariff",
    "meter",
    "asset",
    "trade",
    "quote",
    "position",
    "risk",
    "exposure",
    "price",
    "rate",
    "fx",
    "loan",
    "deposit",
    "branch",
    "employee",
    "payroll",
    "shift",
    "route",
    "vehicle",
    "trip",
    "stop",
    "fleet",
    "warehouse",
    "bin",
    "pick",
    "pack",
    "return",
    "review",
    "rating",
    "survey",
    "lead",
    "opportunity",
    "forecast",
    "budget",
    "cost",
    "margin",
    "tax",
    "discount",
    "coupon",
]
DOMAINS = [
    "sales",
    "finance",
    "marketing",
    "logistics",
    "hr",
    "risk",
    "iot",
    "billing",
    "crm",
    "supply",
    "retail",
    "web",
    "support",
    "fraud",
    "pricing",
    "treasury",
]
LAYERS = ("raw", "staging", "curated", "mart")
TYPES = ("bigint", "string", "decimal(18,2)", "timestamp", "date", "integer", "boolean", "double")
SPARK_COMMANDS = (
    "execute_insert_into_hadoop_fs_relation_command",
    "execute_create_data_source_table_as_select_command",
    "execute_insert_into_hive_table",
    "execute_merge_into_command",
    "execute_optimize_table_command",
)
OPERATORS = (
    "SQLExecuteQueryOperator",
    "SparkKubernetesOperator",
    "S3ToSqlOperator",
    "TrinoOperator",
    "PythonOperator",
    "KubernetesPodOperator",
)
USERS = tuple(f"{w}_{d}" for w in ("analyst", "engineer", "scientist") for d in DOMAINS)


def _mix(*parts: int) -> int:
    """A 64-bit hash of integers (splitmix64 steps): cheap, deterministic, well spread."""
    x = 0x9E3779B97F4A7C15
    for p in parts:
        x = (x ^ (p & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 31)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 29
    return x


def _facet(spec: str, producer: str, **body: Any) -> dict[str, Any]:
    return {"_producer": producer, "_schemaURL": FACETS + spec, **body}


def _job_type(producer: str, integration: str, job_type: str) -> dict[str, Any]:
    return _facet(
        "2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
        producer,
        processingType="BATCH",
        integration=integration,
        jobType=job_type,
    )


def _parent(producer: str, run_id: str, namespace: str, name: str) -> dict[str, Any]:
    return _facet(
        "1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
        producer,
        run={"runId": run_id},
        job={"namespace": namespace, "name": name},
    )


# ------------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Table:
    """A table slot: its store, names and fields (a pure function of the slot and seed)."""

    slot: int
    store: str  # "lakehouse" | "hdfs" | "postgres" | "kafka"
    schema: str
    table: str
    fields: tuple[tuple[str, str], ...]  # (name, type)

    def spark_name(self) -> tuple[str, str]:
        if self.store == "lakehouse":
            return LAKEHOUSE, f"{self.schema}.db/{self.table}"
        if self.store == "hdfs":
            return HDFS, f"/warehouse/{self.schema}.db/{self.table}"
        if self.store == "postgres":
            return POSTGRES, f"oltp.{self.schema}.{self.table}"
        return KAFKA, f"{self.schema}.{self.table}"

    def trino_name(self, namespace: str = TRINO_PROD) -> tuple[str, str]:
        if self.store == "lakehouse":
            return namespace, f"lakehouse.{self.schema}.{self.table}"
        if self.store == "hdfs":
            return namespace, f"hive.{self.schema}.{self.table}"
        return self.spark_name()  # (not behind a metastore: the same name everywhere)

    def hive_name(self) -> tuple[str, str] | None:
        return (
            (HIVE, f"{self.schema}.{self.table}") if self.store in ("lakehouse", "hdfs") else None
        )


class Universe:
    """The platform's pipelines, jobs and tables at any moment, derived on demand."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.table = functools.lru_cache(maxsize=1 << 16)(self._table)
        self.schema_facet = functools.lru_cache(maxsize=1 << 15)(self._schema_facet)

    def h(self, *parts: int) -> int:
        return _mix(self.seed, *parts)

    def pipelines(self, emitted: int) -> int:
        return BASE_PIPELINES + int(emitted * PIPELINES_PER_EVENT)

    def kind(self, pipeline: int) -> str:
        r = self.h(1, pipeline) % 100
        return "spark" if r < 45 else "airflow" if r < 80 else "dbt"

    def size(self, pipeline: int) -> int:
        r = self.h(2, pipeline)
        kind = self.kind(pipeline)
        if kind == "spark":
            return 1 + r % 6
        if kind == "airflow":
            return 2 + r % 7
        return 4 + r % 5

    def writer_kind(self, slot: int) -> str | None:
        """The kind of the pipeline whose job writes table slot `slot`, or None (a source)."""
        job = slot // 3
        pipeline, k = divmod(job, SLOTS)
        if k >= self.size(pipeline) or (slot % 3 == 1 and self.h(3, job) % 10 >= 3):
            return None
        return None if slot % 3 == 2 else self.kind(pipeline)

    def _table(self, slot: int) -> Table:
        r = self.h(4, slot)
        writer = self.writer_kind(slot)
        if writer == "spark":
            store = "hdfs" if r % 5 == 0 else "lakehouse"
        elif writer is not None:
            store = "lakehouse"
        else:
            store = ("postgres", "postgres", "kafka", "lakehouse", "lakehouse")[r % 5]
        domain = DOMAINS[(r >> 8) % len(DOMAINS)]
        layer = "raw" if writer is None else LAYERS[1 + (r >> 12) % 3]
        words = [WORDS[(r >> (16 + 7 * i)) % len(WORDS)] for i in range(2)]
        name = f"{words[0]}_{words[1]}_{slot:x}"
        n_fields = 4 + (r >> 32) % 29
        fields: dict[str, str] = {}
        for i in range(n_fields):
            f = self.h(5, slot, i)
            base = WORDS[f % len(WORDS)]
            suffix = ("id", "ts", "amount", "code", "name", "count", "flag", "date")[(f >> 8) % 8]
            fields.setdefault(f"{base}_{suffix}", TYPES[(f >> 16) % len(TYPES)])
        return Table(slot, store, f"{domain}_{layer}", name, tuple(fields.items()))

    def _schema_facet(self, slot: int, producer: str) -> dict[str, Any]:
        fields = [{"name": n, "type": t} for n, t in self.table(slot).fields]
        return _facet(
            "1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet", producer, fields=fields
        )

    def job_tables(self, job: int) -> tuple[list[int], list[int]]:
        """(inputs, outputs) table slots of job slot `job`."""
        outputs = [3 * job] + ([3 * job + 1] if self.h(3, job) % 10 < 3 else [])
        pipeline = job // SLOTS
        span = 3 * SLOTS * max(pipeline, 50)  # tables of earlier pipelines (or sources)
        r = self.h(6, job)
        n_inputs = 1 + (r % 7 + 1) // 2 if r % 7 else 1  # 1-4, mostly 1-2
        inputs = []
        for i in range(min(4, n_inputs)):
            pick = self.h(7, job, i)
            # A third of the reads go to the last few pipelines' tables (a recent layer),
            # the rest anywhere before: older tables gather readers, as on a platform.
            if pick % 3 == 0 and pipeline > 8:
                lo = 3 * SLOTS * (pipeline - 8)
                slot = lo + (pick >> 8) % (3 * SLOTS * pipeline - lo)
            else:
                slot = (pick >> 8) % span
            if slot not in outputs and slot not in inputs:
                inputs.append(slot)
        return inputs or [(3 * job + 2)], outputs


# -------------------------------------------------------------------- dataset references


def _ref(namespace: str, name: str, facets: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "facets": facets or {}}


def spark_ref(u: Universe, slot: int, full: bool) -> dict[str, Any]:
    t = u.table(slot)
    namespace, name = t.spark_name()
    if not full:
        return _ref(namespace, name)
    facets: dict[str, Any] = {
        "dataSource": _facet(
            "1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
            SPARK,
            name=namespace,
            uri=namespace,
        ),
        "schema": u.schema_facet(slot, SPARK),
    }
    hive = t.hive_name()
    if hive is not None:
        facets["symlinks"] = _facet(
            "1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
            SPARK,
            identifiers=[{"namespace": hive[0], "name": hive[1], "type": "TABLE"}],
        )
    return _ref(namespace, name, facets)


def trino_ref(u: Universe, slot: int, namespace: str, producer: str, full: bool) -> dict[str, Any]:
    t = u.table(slot)
    ns, name = t.trino_name(namespace)
    if not full:
        return _ref(ns, name)
    facets: dict[str, Any] = {"schema": u.schema_facet(slot, producer)}
    if ns == TRINO_ADHOC:
        facets["catalog"] = _facet(
            "1-0-0/CatalogDatasetFacet.json#/$defs/CatalogDatasetFacet",
            producer,
            framework="iceberg",
            type="hive",
            name=name.split(".", 1)[0],
            metadataUri="thrift://hive-metastore:9083",
            source="trino",
        )
    return _ref(ns, name, facets)


def column_lineage(
    u: Universe, out: Table, inputs: list[tuple[Table, str, str]], producer: str
) -> dict[str, Any]:
    """Each output field from one or two input fields (same name first), as the integrations
    report them; `inputs` are (table, namespace, name) as this producer names them."""
    fields: dict[str, Any] = {}
    for i, (name, _) in enumerate(out.fields):
        sources = []
        for k, (table, ns, ds_name) in enumerate(inputs[:2]):
            names = [f for f, _ in table.fields]
            field = name if name in names else names[(i + k) % len(names)]
            kind = u.h(8, out.slot, i, k) % 10
            transformation = (
                {"type": "DIRECT", "subtype": "IDENTITY", "description": "", "masking": False}
                if field == name or kind < 5
                else {
                    "type": "DIRECT",
                    "subtype": "TRANSFORMATION",
                    "description": "",
                    "masking": False,
                }
                if kind < 8
                else {
                    "type": "DIRECT",
                    "subtype": "AGGREGATION",
                    "description": "",
                    "masking": False,
                }
            )
            sources.append(
                {
                    "namespace": ns,
                    "name": ds_name,
                    "field": field,
                    "transformations": [transformation],
                }
            )
            if kind < 6:
                break
        fields[name] = {"inputFields": sources}
    return _facet(
        "1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
        producer,
        fields=fields,
    )


def output_statistics(rng: random.Random, producer: str) -> dict[str, Any]:
    return {
        "outputStatistics": _facet(
            "1-0-2/OutputStatisticsOutputDatasetFacet.json#/$defs/OutputStatisticsOutputDatasetFacet",
            producer,
            rowCount=rng.randint(1, 90_000_000),
            size=rng.randint(1_000, 40_000_000_000),
        )
    }


def error_message(rng: random.Random, language: str, where: str) -> dict[str, Any]:
    frames = "\n".join(
        f"\tat org.apache.{rng.choice(WORDS)}.{rng.choice(WORDS)}.{rng.choice(WORDS).title()}"
        f"Exec.doExecute({rng.choice(WORDS).title()}.scala:{rng.randint(20, 900)})"
        for _ in range(rng.randint(3, 25))
    )
    return _facet(
        "1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
        SPARK if language == "JAVA" else AIRFLOW,
        message=f"{where} failed: {rng.choice(WORDS)} {rng.randint(1, 10**9)} not found",
        programmingLanguage=language,
        stackTrace=frames,
    )


# ------------------------------------------------------------------------ Spark plans


def logical_plan(
    rng: random.Random, target: int, out: Table, inputs: list[Table], command: str
) -> msgspec.Raw:
    """A `spark.logicalPlan` facet of about `target` bytes, in the shape the Spark
    integration serializes Catalyst plans (scenarios/CLL/8.json): the command, then
    Project / Filter / Join / Aggregate nodes over the input relations, every expression a
    pre-order list of nodes with its exprId; names, ids and literals varied per run."""
    jvm = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    next_id = rng.randint(0, 5_000)
    attrs: list[tuple[str, str, int, str]] = []  # (name, type, exprId, qualifier)
    pieces: list[bytes] = []
    size = 0
    enc = msgspec.json.encode

    def expr_id(i: int) -> dict[str, Any]:
        return {
            "product-class": "org.apache.spark.sql.catalyst.expressions.ExprId",
            "id": i,
            "jvmId": jvm,
        }

    def attr(name: str, dtype: str, i: int, qualifier: str) -> dict[str, Any]:
        return {
            "class": "org.apache.spark.sql.catalyst.expressions.AttributeReference",
            "num-children": 0,
            "name": name,
            "dataType": dtype,
            "nullable": rng.random() < 0.8,
            "metadata": {},
            "exprId": expr_id(i),
            "qualifier": f"[{qualifier}]" if qualifier else [],
        }

    def literal() -> dict[str, Any]:
        if rng.random() < 0.5:
            return {
                "class": "org.apache.spark.sql.catalyst.expressions.Literal",
                "num-children": 0,
                "value": str(rng.randint(-(10**6), 10**9)),
                "dataType": "integer",
            }
        return {
            "class": "org.apache.spark.sql.catalyst.expressions.Literal",
            "num-children": 0,
            "value": f"{rng.choice(WORDS)}-{rng.getrandbits(24):x}",
            "dataType": "string",
        }

    def catalog_table(t: Table) -> dict[str, Any]:
        return {
            "product-class": "org.apache.spark.sql.catalyst.catalog.CatalogTable",
            "identifier": {
                "product-class": "org.apache.spark.sql.catalyst.TableIdentifier",
                "table": t.table,
                "database": t.schema,
            },
            "tableType": {
                "product-class": "org.apache.spark.sql.catalyst.catalog.CatalogTableType",
                "name": rng.choice(("MANAGED", "EXTERNAL")),
            },
            "storage": {
                "product-class": "org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat",
                "locationUri": "/".join(t.spark_name()),
                "inputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
                "outputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
                "serde": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                "compressed": False,
                "properties": {"serialization.format": "1"},
            },
            "schema": {
                "type": "struct",
                "fields": [
                    {"name": n, "type": ty, "nullable": True, "metadata": {}} for n, ty in t.fields
                ],
            },
            "provider": "hive",
            "partitionColumnNames": [],
            "owner": rng.choice(USERS),
            "createTime": 1_700_000_000_000 + rng.getrandbits(34),
            "lastAccessTime": 0,
            "createVersion": "3.5.1",
            "properties": {"transient_lastDdlTime": str(1_700_000_000 + rng.getrandbits(24))},
            "unsupportedFeatures": [],
            "tracksPartitionsInCatalog": True,
            "schemaPreservesCase": True,
            "ignoredProperties": None,
        }

    def add(node: dict[str, Any]) -> None:
        nonlocal size
        piece = enc(node)
        pieces.append(piece)
        size += len(piece) + 1

    add(
        {
            "class": f"org.apache.spark.sql.execution.command.{command.title().replace('_', '')}",
            "num-children": 1,
            "tableDesc": catalog_table(out),
            "query": 0,
            "outputColumnNames": "[" + ", ".join(n for n, _ in out.fields) + "]",
            "mode": rng.choice((None, "Append", "Overwrite")),
        }
    )
    for t in inputs:
        cols = []
        for n, ty in t.fields:
            attrs.append((n, ty, next_id, t.table))
            cols.append([attr(n, ty, next_id, "")])
            next_id += 1
        add(
            {
                "class": "org.apache.spark.sql.catalyst.catalog.HiveTableRelation",
                "num-children": 0,
                "tableMeta": catalog_table(t),
                "dataCols": cols,
                "partitionCols": [],
                "tableStats": None,
            }
        )
    while size < target:
        kind = rng.random()
        if kind < 0.4:  # Project: aliases over functions of attributes
            items = []
            for _ in range(rng.randint(4, 24)):
                n, ty, i, q = rng.choice(attrs)
                alias = f"{n}_{rng.choice(WORDS)}"
                fn = rng.choice(("Cast", "Upper", "Coalesce", "Concat", "DateFormatClass", "Round"))
                items.append(
                    [
                        {
                            "class": "org.apache.spark.sql.catalyst.expressions.Alias",
                            "num-children": 1,
                            "child": 0,
                            "name": alias,
                            "exprId": expr_id(next_id),
                            "qualifier": [],
                            "nonInheritableMetadataKeys": [],
                        },
                        {
                            "class": f"org.apache.spark.sql.catalyst.expressions.{fn}",
                            "num-children": 2,
                            "children": [0, 1],
                        },
                        attr(n, ty, i, q),
                        literal(),
                    ]
                )
                attrs.append((alias, ty, next_id, ""))
                next_id += 1
            add(
                {
                    "class": "org.apache.spark.sql.catalyst.plans.logical.Project",
                    "num-children": 1,
                    "projectList": items,
                    "child": 0,
                }
            )
        elif kind < 0.65:  # Filter
            conjuncts = []
            for _ in range(rng.randint(1, 6)):
                n, ty, i, q = rng.choice(attrs)
                op = rng.choice(("GreaterThan", "EqualTo", "LessThanOrEqual", "In", "Like"))
                conjuncts += [
                    {
                        "class": "org.apache.spark.sql.catalyst.expressions.And",
                        "num-children": 2,
                        "left": 0,
                        "right": 1,
                    },
                    {
                        "class": "org.apache.spark.sql.catalyst.expressions.IsNotNull",
                        "num-children": 1,
                        "child": 0,
                    },
                    attr(n, ty, i, q),
                    {
                        "class": f"org.apache.spark.sql.catalyst.expressions.{op}",
                        "num-children": 2,
                        "left": 0,
                        "right": 1,
                    },
                    attr(n, ty, i, q),
                    literal(),
                ]
            add(
                {
                    "class": "org.apache.spark.sql.catalyst.plans.logical.Filter",
                    "num-children": 1,
                    "condition": conjuncts,
                    "child": 0,
                }
            )
        elif kind < 0.8:  # Join
            (ln, lt, li, lq), (rn, rt, ri, rq) = rng.choice(attrs), rng.choice(attrs)
            add(
                {
                    "class": "org.apache.spark.sql.catalyst.plans.logical.Join",
                    "num-children": 2,
                    "left": 0,
                    "right": 1,
                    "joinType": {
                        "object": CATALYST
                        + "plans."
                        + rng.choice(("Inner$", "LeftOuter$", "FullOuter$"))
                    },
                    "condition": [
                        {
                            "class": "org.apache.spark.sql.catalyst.expressions.EqualTo",
                            "num-children": 2,
                            "left": 0,
                            "right": 1,
                        },
                        attr(ln, lt, li, lq),
                        attr(rn, rt, ri, rq),
                    ],
                    "hint": None,
                }
            )
        else:  # Aggregate
            groups = [[attr(*rng.choice(attrs))] for _ in range(rng.randint(1, 5))]
            aggs = []
            for _ in range(rng.randint(1, 10)):
                n, ty, i, q = rng.choice(attrs)
                fn = rng.choice(("Sum", "Max", "Min", "Count", "Average", "First"))
                aggs.append(
                    [
                        {
                            "class": "org.apache.spark.sql.catalyst.expressions.Alias",
                            "num-children": 1,
                            "child": 0,
                            "name": f"{fn.lower()}_{n}",
                            "exprId": expr_id(next_id),
                            "qualifier": [],
                            "nonInheritableMetadataKeys": [],
                        },
                        {
                            "class": CATALYST + "expressions.aggregate.AggregateExpression",
                            "num-children": 1,
                            "aggregateFunction": 0,
                            "mode": {"object": CATALYST + "expressions.aggregate.Complete$"},
                            "isDistinct": rng.random() < 0.1,
                            "resultId": expr_id(next_id + 1),
                        },
                        {
                            "class": f"org.apache.spark.sql.catalyst.expressions.aggregate.{fn}",
                            "num-children": 1,
                            "child": 0,
                        },
                        attr(n, ty, i, q),
                    ]
                )
                next_id += 2
            add(
                {
                    "class": "org.apache.spark.sql.catalyst.plans.logical.Aggregate",
                    "num-children": 1,
                    "groupingExpressions": groups,
                    "aggregateExpressions": aggs,
                    "child": 0,
                }
            )
    head = (
        b'{"_producer":"' + SPARK.encode() + b'","_schemaURL":"https://openlineage.io/spec/2-0-2/'
        b'OpenLineage.json#/$defs/RunFacet","plan":['
    )
    return msgspec.Raw(head + b",".join(pieces) + b"]}")


# ----------------------------------------------------------------------------- workloads

Event = dict[str, Any]


class Corpus:
    """The stream of events: CONCURRENT workloads at a time, their events interleaved."""

    def __init__(self, seed: int) -> None:
        self.u = Universe(seed)
        self.rng = random.Random(seed)
        self.emitted = 0
        self.clock = START
        self.queries = 0  # Trino query counter (its ids)
        self.counts: dict[str, int] = {}  # events by producer kind ("spark", "spark plan", ...)

    # ids and times
    def run_id(self) -> str:
        millis = int(self.clock.timestamp() * 1000)
        rand = self.rng.getrandbits(74)
        value = (millis << 80) | (0x7 << 76) | ((rand >> 62) << 64) | (0b10 << 62)
        return str(uuid.UUID(int=value | (rand & ((1 << 62) - 1))))

    def _stamp(self) -> str:
        return self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def events(self, limit: int) -> Iterator[bytes]:
        """The first `limit` events as JSON bytes, in emission order."""
        encode = msgspec.json.Encoder().encode
        active = [self._workload() for _ in range(CONCURRENT)]
        rng = self.rng
        while self.emitted < limit:
            i = rng.randrange(CONCURRENT)
            try:
                event = next(active[i])
            except StopIteration:
                active[i] = self._workload()
                continue
            self.clock += dt.timedelta(seconds=rng.expovariate(1 / MEAN_GAP_S))
            event["eventTime"] = self._stamp()
            self.emitted += 1
            yield encode(event)

    def _workload(self) -> Iterator[Event]:
        r = self.rng.random()
        if r < 0.5:
            return self._trino_query()
        pipeline = self.rng.randrange(self.u.pipelines(self.emitted))
        kind = self.u.kind(pipeline)
        if kind == "spark":
            return self._spark_app(pipeline)
        if kind == "airflow":
            return self._dag(pipeline)
        return self._dbt(pipeline)

    def _count(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    @staticmethod
    def _event(
        producer: str,
        event_type: str,
        run: dict[str, Any],
        job: dict[str, Any],
        inputs: list[Any] | None = None,
        outputs: list[Any] | None = None,
    ) -> Event:
        return {
            "eventTime": None,
            "producer": producer,
            "schemaURL": SCHEMA_URL,
            "eventType": event_type,
            "run": run,
            "job": job,
            "inputs": inputs or [],
            "outputs": outputs or [],
        }

    def _pipeline_name(self, pipeline: int) -> str:
        u = self.u
        return f"{DOMAINS[u.h(9, pipeline) % len(DOMAINS)]}_{WORDS[u.h(10, pipeline) % len(WORDS)]}"

    # Spark --------------------------------------------------------------------------
    def _spark_app(self, pipeline: int) -> Iterator[Event]:
        u, rng = self.u, self.rng
        app = f"{self._pipeline_name(pipeline)}_etl_{pipeline:x}"
        run_id = self.run_id()
        plans = u.h(11, pipeline) % 100 < PLAN_APPS_PERCENT
        engine = {
            "spark_properties": _facet(
                "2-0-2/OpenLineage.json#/$defs/RunFacet",
                SPARK,
                properties={
                    "spark.master": "k8s://https://kubernetes.default.svc:443",
                    "spark.app.name": app,
                },
            ),
            "processing_engine": _facet(
                "1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
                SPARK,
                version="3.5.2",
                name="spark",
                openlineageAdapterVersion="1.23.0",
            ),
        }
        app_job = {
            "namespace": "spark-prod",
            "name": app,
            "facets": {"jobType": _job_type(SPARK, "SPARK", "APPLICATION")},
        }
        self._count("spark")
        yield self._event(
            SPARK,
            "START",
            {
                "runId": run_id,
                "facets": {
                    **engine,
                    "spark_applicationDetails": _facet(
                        "1-0-0/SparkApplicationDetailsRunFacet.json",
                        SPARK,
                        master="k8s",
                        appName=app,
                        applicationId=f"spark-{rng.getrandbits(64):016x}",
                        deployMode="cluster",
                        driverHost=f"{app.replace('_', '-')}-driver-svc",
                        userName="stackable",
                        uiWebUrl=None,
                        proxyUrl=None,
                        historyUrl=None,
                    ),
                },
            },
            app_job,
        )
        parent = _parent(SPARK, run_id, "spark-prod", app)
        aborted = rng.random() < 0.01
        for k in range(u.size(pipeline)):
            if aborted and k > 0:
                break
            yield from self._spark_query(pipeline * SLOTS + k, app, parent, engine, plans)
        self._count("spark")
        yield self._event(
            SPARK, "ABORT" if aborted else "COMPLETE", {"runId": run_id, "facets": engine}, app_job
        )

    def _spark_query(
        self, job: int, app: str, parent: dict[str, Any], engine: dict[str, Any], plans: bool
    ) -> Iterator[Event]:
        u, rng = self.u, self.rng
        inputs, outputs = u.job_tables(job)
        export = u.h(12, job) % 10 < 3  # writes a new dated path each run
        out_table = u.table(outputs[0])
        command = SPARK_COMMANDS[u.h(13, job) % len(SPARK_COMMANDS)]
        name = f"{app}.{command}.{out_table.schema}_{out_table.table}"
        job_facets = {
            "jobType": _job_type(SPARK, "SPARK", "SQL_JOB"),
            "sql": _facet(
                "1-0-1/SQLJobFacet.json#/$defs/SQLJobFacet",
                SPARK,
                query=self._sql(out_table, [u.table(s) for s in inputs], "spark"),
            ),
        }
        run_id = self.run_id()
        ins_full = [spark_ref(u, s, True) for s in inputs]
        outs_full = [spark_ref(u, s, True) for s in outputs]
        if export:
            day = self.clock.strftime("%Y/%m/%d")
            outs_full.append(
                _ref(
                    "s3a://exports",
                    f"{app}/{day}/{rng.getrandbits(40):x}",
                    {"schema": u.schema_facet(outputs[0], SPARK)},
                )
            )
        target = int(PLAN_MIN * (PLAN_MAX / PLAN_MIN) ** (u.h(14, job) % 1000 / 1000))
        in_tables = [u.table(s) for s in inputs]

        def plan() -> dict[str, Any]:
            if not plans:
                return {}
            self._count("spark plan")
            size = int(target * rng.uniform(0.9, 1.1))
            return {"spark.logicalPlan": logical_plan(rng, size, out_table, in_tables, command)}

        run = {"parent": parent, **engine}
        job_ref = {"namespace": "spark-prod", "name": name, "facets": job_facets}
        self._count("spark")
        yield self._event(
            SPARK,
            "START",
            {"runId": run_id, "facets": {**run, **plan()}},
            job_ref,
            ins_full,
            outs_full,
        )
        for _ in range(rng.choice((0, 1, 1, 2))):
            self._count("spark")
            yield self._event(
                SPARK,
                "RUNNING",
                {
                    "runId": run_id,
                    "facets": {
                        **run,
                        "spark_jobDetails": _facet(
                            "2-0-2/OpenLineage.json#/$defs/RunFacet",
                            SPARK,
                            jobId=rng.randint(0, 500),
                        ),
                    },
                },
                {"namespace": "spark-prod", "name": name, "facets": {}},
                [_ref(*u.table(s).spark_name()) for s in inputs],
                [_ref(o["namespace"], o["name"]) for o in outs_full],
            )
        failed = rng.random() < 0.04
        end_outputs = []
        for o, slot in zip(outs_full, [*outputs, outputs[0]], strict=False):
            facets = dict(o["facets"])
            ref: dict[str, Any] = {"namespace": o["namespace"], "name": o["name"], "facets": facets}
            if not failed:
                facets["columnLineage"] = self._spark_cll(u.table(slot), in_tables)
                ref["outputFacets"] = output_statistics(rng, SPARK)
            end_outputs.append(ref)
        facets = {**run, **plan()}
        if failed:
            facets["errorMessage"] = error_message(rng, "JAVA", name)
        self._count("spark")
        yield self._event(
            SPARK,
            "FAIL" if failed else "COMPLETE",
            {"runId": run_id, "facets": facets},
            {"namespace": "spark-prod", "name": name, "facets": {}},
            [_ref(*t.spark_name()) for t in in_tables],
            end_outputs,
        )

    def _spark_cll(self, out: Table, inputs: list[Table]) -> dict[str, Any]:
        return column_lineage(self.u, out, [(t, *t.spark_name()) for t in inputs], SPARK)

    def _sql(self, out: Table, inputs: list[Table], dialect: str) -> str:
        def name(t: Table) -> str:
            return t.trino_name()[1] if dialect == "trino" else f"{t.schema}.{t.table}"

        cols = ", ".join(f"s0.{f}" for f, _ in out.fields[:12])
        joins = " ".join(
            f"LEFT JOIN {name(t)} s{i} ON s0.{inputs[0].fields[0][0]} = s{i}.{t.fields[0][0]}"
            for i, t in enumerate(inputs[1:], 1)
        )
        first, last = inputs[0].fields[0][0], inputs[0].fields[-1][0]
        where = f"s0.{last} IS NOT NULL AND s0.{first} > {self.rng.randint(0, 10**6)}"
        return (
            f"INSERT INTO {name(out)} SELECT {cols} FROM {name(inputs[0])} s0 {joins} WHERE {where}"
        )

    # Trino --------------------------------------------------------------------------
    def _trino_query(self) -> Iterator[Event]:
        u, rng = self.u, self.rng
        self.queries += 1
        adhoc = rng.random() < 0.3
        namespace = TRINO_ADHOC if adhoc else TRINO_PROD
        qid = (
            f"{self.clock.strftime('%Y%m%d_%H%M%S')}_{self.queries % 100000:05d}_"
            f"{''.join(rng.choice('abcdefghijkmnpqrstuvwxyz23456789') for _ in range(5))}"
        )
        tables = u.pipelines(self.emitted) * SLOTS * 3
        reads = [rng.randrange(tables) for _ in range(rng.choice((1, 1, 2, 3)))]
        in_tables = [u.table(s) for s in reads]
        ctas = rng.random() < 0.6
        user = rng.choice(USERS)
        outputs: list[Any] = []
        if ctas:
            scratch = f"lakehouse.scratch_{user}.tmp_{qid[-5:]}_{self.queries:x}"
            fields = in_tables[0].fields
            out = Table(-1, "lakehouse", f"scratch_{user}", scratch.rsplit(".", 1)[1], fields)
            select = self._sql(out, in_tables, "trino").split(" SELECT ", 1)[1]
            sql = f"CREATE TABLE {scratch} AS SELECT {select}"
            outputs = [
                {
                    "namespace": namespace,
                    "name": scratch,
                    "facets": {
                        "schema": _facet(
                            "1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
                            TRINO,
                            fields=[{"name": n, "type": t} for n, t in fields],
                        ),
                        "columnLineage": column_lineage(
                            u, out, [(t, *t.trino_name(namespace)) for t in in_tables], TRINO
                        ),
                    },
                }
            ]
        else:
            cols = ", ".join(f for f, _ in in_tables[0].fields[: rng.randint(1, 8)])
            sql = (
                f"SELECT {cols}, count(*) FROM {in_tables[0].trino_name()[1]} WHERE "
                f"{in_tables[0].fields[0][0]} >= {rng.randint(0, 10**7)} GROUP BY {cols} "
                f"ORDER BY 2 DESC LIMIT {rng.choice((10, 100, 1000))}"
            )
        job = {
            "namespace": "prod-lineage",
            "name": qid,
            "facets": {
                "jobType": _job_type(TRINO, "TRINO", "QUERY"),
                "sql": _facet("1-0-1/SQLJobFacet.json#/$defs/SQLJobFacet", TRINO, query=sql),
            },
        }
        run_id = self.run_id()
        inputs = [trino_ref(u, s, namespace, TRINO, True) for s in reads]
        context = {
            "trino_metadata": _facet(
                "1-0-0/TrinoMetadataRunFacet.json",
                TRINO,
                queryId=qid,
                transactionId=self.run_id(),
                user=user,
                source=rng.choice(("superset", "trino-cli", "airflow", "dbt")),
            )
        }
        self._count("trino")
        yield self._event(
            TRINO, "START", {"runId": run_id, "facets": context}, job, inputs, outputs
        )
        failed = rng.random() < 1 / 12
        facets = dict(context)
        if failed:
            facets["errorMessage"] = _facet(
                "1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
                TRINO,
                message=f"line 1:{rng.randint(1, 200)}: Column '{rng.choice(WORDS)}' "
                "cannot be resolved",
                programmingLanguage="JAVA",
            )
        self._count("trino")
        yield self._event(
            TRINO,
            "FAIL" if failed else "COMPLETE",
            {"runId": run_id, "facets": facets},
            {"namespace": "prod-lineage", "name": qid, "facets": {}},
            [_ref(i["namespace"], i["name"]) for i in inputs],
            outputs,
        )

    # dbt ----------------------------------------------------------------------------
    def _dbt(self, pipeline: int) -> Iterator[Event]:
        u, rng = self.u, self.rng
        project = f"{DOMAINS[u.h(9, pipeline) % len(DOMAINS)]}_models_{pipeline:x}"
        run_id = self.run_id()
        job = {
            "namespace": "dbt",
            "name": f"dbt-run-{project}",
            "facets": {"jobType": _job_type(DBT, "DBT", "JOB")},
        }
        run_facets = {
            "dbt_version": _facet("1-0-0/DbtVersionRunFacet.json", DBT, version="1.8.7"),
            "processing_engine": _facet(
                "1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
                DBT,
                version="1.8.7",
                name="dbt",
                openlineageAdapterVersion="1.23.0",
            ),
        }
        self._count("dbt")
        yield self._event(DBT, "START", {"runId": run_id, "facets": run_facets}, job)
        parent = _parent(DBT, run_id, "dbt", f"dbt-run-{project}")
        failures = 0
        for k in range(u.size(pipeline)):
            slot = pipeline * SLOTS + k
            inputs, outputs = u.job_tables(slot)
            out = u.table(outputs[0])
            in_tables = [u.table(s) for s in inputs]
            model_job = {
                "namespace": "dbt",
                "name": f"{project}.model.{out.schema}.{out.table}",
                "facets": {
                    "jobType": _job_type(DBT, "DBT", "MODEL"),
                    "sql": _facet(
                        "1-0-1/SQLJobFacet.json#/$defs/SQLJobFacet",
                        DBT,
                        query=self._sql(out, in_tables, "trino"),
                    ),
                },
            }
            model_run = self.run_id()
            ins = [trino_ref(u, s, TRINO_PROD, DBT, False) for s in inputs]
            self._count("dbt")
            yield self._event(
                DBT,
                "START",
                {"runId": model_run, "facets": {"parent": parent}},
                model_job,
                ins,
                [trino_ref(u, s, TRINO_PROD, DBT, False) for s in outputs],
            )
            failed = rng.random() < 0.02
            failures += failed
            end_outputs = []
            for s in outputs:
                ref = trino_ref(u, s, TRINO_PROD, DBT, True)
                if not failed:
                    ref["facets"]["columnLineage"] = column_lineage(
                        u, u.table(s), [(t, *t.trino_name()) for t in in_tables], DBT
                    )
                    ref["outputFacets"] = output_statistics(rng, DBT)
                end_outputs.append(ref)
            facets: dict[str, Any] = {"parent": parent}
            if failed:
                facets["errorMessage"] = error_message(rng, "PYTHON", str(model_job["name"]))
            self._count("dbt")
            yield self._event(
                DBT,
                "FAIL" if failed else "COMPLETE",
                {"runId": model_run, "facets": facets},
                {"namespace": "dbt", "name": model_job["name"], "facets": {}},
                ins,
                end_outputs,
            )
        self._count("dbt")
        yield self._event(
            DBT,
            "FAIL" if failures else "COMPLETE",
            {"runId": run_id, "facets": run_facets},
            {**job, "facets": {}},
        )

    # Airflow ------------------------------------------------------------------------
    def _dag(self, pipeline: int) -> Iterator[Event]:
        u, rng = self.u, self.rng
        dag = f"{self._pipeline_name(pipeline)}_dag_{pipeline:x}"
        run_id = self.run_id()
        dag_run = f"scheduled__{self._stamp()}"
        dag_facets = {
            "airflowDagRun": _facet(
                "1-0-0/AirflowDagRunFacet.json",
                AIRFLOW,
                dag={
                    "dag_id": dag,
                    "owner": "data-eng",
                    "schedule_interval": "@daily",
                    "tags": [DOMAINS[u.h(9, pipeline) % len(DOMAINS)]],
                },
                dagRun={"dag_id": dag, "run_id": dag_run, "run_type": "scheduled"},
            )
        }
        job = {
            "namespace": "airflow-prod",
            "name": dag,
            "facets": {"jobType": _job_type(AIRFLOW, "AIRFLOW", "DAG")},
        }
        self._count("airflow")
        yield self._event(AIRFLOW, "START", {"runId": run_id, "facets": dag_facets}, job)
        parent = _parent(AIRFLOW, run_id, "airflow-prod", dag)
        failed_dag = False
        for k in range(u.size(pipeline)):
            slot = pipeline * SLOTS + k
            inputs, outputs = u.job_tables(slot)
            operator = OPERATORS[u.h(15, slot) % len(OPERATORS)]
            task = f"{operator.lower().replace('operator', '')}_{u.table(outputs[0]).table}"
            ins = [trino_ref(u, s, TRINO_PROD, AIRFLOW, False) for s in inputs]
            if k == 0:  # the ingestion task: a new landing file each run
                day = self.clock.strftime("%Y/%m/%d")
                ins = [
                    _ref("s3a://landing", f"{dag}/{day}/{rng.getrandbits(48):x}.parquet")
                    for _ in range(rng.choice((2, 3, 4)))
                ]
            outs = [trino_ref(u, s, TRINO_PROD, AIRFLOW, False) for s in outputs]
            for attempt in (1, 2):
                task_run = self.run_id()
                facets = {
                    "parent": parent,
                    "airflow": _facet(
                        "1-0-0/AirflowRunFacet.json",
                        AIRFLOW,
                        dag={"dag_id": dag, "owner": "data-eng"},
                        task={
                            "task_id": task,
                            "operator_class": operator,
                            "retries": 1,
                            "owner": "data-eng",
                            "queue": "default",
                        },
                        taskInstance={
                            "try_number": attempt,
                            "pool": "default_pool",
                            "map_index": -1,
                        },
                        taskUuid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    ),
                }
                task_job = {
                    "namespace": "airflow-prod",
                    "name": f"{dag}.{task}",
                    "facets": {"jobType": _job_type(AIRFLOW, "AIRFLOW", "TASK")},
                }
                self._count("airflow")
                yield self._event(
                    AIRFLOW, "START", {"runId": task_run, "facets": facets}, task_job, ins, outs
                )
                failed = rng.random() < 0.03
                end = {"parent": parent}
                if failed:
                    end["errorMessage"] = error_message(rng, "PYTHON", task)
                self._count("airflow")
                yield self._event(
                    AIRFLOW,
                    "FAIL" if failed else "COMPLETE",
                    {"runId": task_run, "facets": end},
                    {"namespace": "airflow-prod", "name": task_job["name"], "facets": {}},
                    ins,
                    outs,
                )
                if not failed:
                    break
                failed_dag = attempt == 2
        self._count("airflow")
        yield self._event(
            AIRFLOW,
            "FAIL" if failed_dag else "COMPLETE",
            {"runId": run_id, "facets": dag_facets},
            {**job, "facets": {}},
        )


def events(limit: int, seed: int) -> Iterator[bytes]:
    """The first `limit` events of the corpus of `seed`."""
    return Corpus(seed).events(limit)
