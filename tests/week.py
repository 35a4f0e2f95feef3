"""A generated week of a platform: the events and named handles of what is interesting in it.

Deterministic for a seed. Six times a day an Airflow DAG (`daily_platform`, six tasks,
each task run a child of the DAG run) extracts three source tables; three Spark jobs
build tables in `s3a://warehouse` (each with a `symlinks` facet naming its Hive table in
`hive://hive-metastore:9083`); a Trino query (a job per query, as Trino names them) reads
`lakehouse.sales.orders_daily` and writes `lakehouse.sales.orders_summary` under a
`trino://` namespace (the `lakehouse` catalog is the Hive metastore's: CATALOGS); eight dbt
models on Trino build `lakehouse.analytics.*` with schema and column lineage; and the last
Airflow task publishes a report from `rpt_daily_kpis`. Every hour the BI service queries the
KPIs. About 2,000 events over 7 days; about 5 % of runs fail (each run alone, at random
before the last day); `sales.db/orders_daily` gains a column mid-week; on the last day's
last cycle the Spark job building `sales.db/customers` fails, then the Trino query writing
`orders_summary` fails, and the dbt models and the report run after both.

Jobs carry an `ownership` facet. `week()` gives the events in eventTime order and the
handles (`Week`) other tests ask about.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.support import (
    BRIEF_CATALOGS,
    DBT_PRODUCER,
    TRINO,
    TRINO_PRODUCER,
    facet,
    run_event,
    schema_facet,
)

SPARK_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/spark"
AIRFLOW_PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.1.0"
HIVE = "hive://hive-metastore:9083"
WAREHOUSE = "s3a://warehouse"
SOURCE_DB = "postgres://orders-db.prod.svc.cluster.local:5432"
REPORTS = "s3a://reports"
# The Trino catalog `lakehouse` is the Hive metastore's: its names join their Hive names.
CATALOGS = BRIEF_CATALOGS
START = dt.datetime(2026, 9, 7, tzinfo=dt.UTC)  # a Monday
DAYS = 7
CYCLE_HOURS = (0, 4, 8, 12, 16, 20)
FAILURE_RATE = 0.05

AIRFLOW_NS, SPARK_NS, DBT_NS, TRINO_JOBS_NS = (
    "airflow-prod",
    "spark-prod",
    "dbt://prod",
    "prod-lineage",
)
DAG = "daily_platform"
TASKS = (
    "extract_orders",
    "extract_customers",
    "extract_sessions",
    "run_spark",
    "run_dbt",
    "publish_report",
)
# when each task starts in a cycle: the extracts, Spark, dbt, then the report
TASK_MINUTES = (0, 2, 4, 15, 39, 50)
SOURCES = {
    "orders": [("order_id", "bigint"), ("customer_id", "bigint"), ("amount", "numeric")],
    "customers": [("customer_id", "bigint"), ("region", "text")],
    "sessions": [("session_id", "text"), ("customer_id", "bigint"), ("seconds", "integer")],
}
# Spark job -> (raw input, table path, Hive table, fields)
SPARK = {
    "orders_etl": (
        "raw.db/orders",
        "sales.db/orders_daily",
        "sales.orders_daily",
        [("order_id", "long"), ("customer_id", "long"), ("amount", "decimal(18,2)")],
    ),
    "customers_etl": (
        "raw.db/customers",
        "sales.db/customers",
        "sales.customers",
        [("customer_id", "long"), ("region", "string")],
    ),
    "sessions_etl": (
        "raw.db/sessions",
        "web.db/sessions_daily",
        "web.sessions_daily",
        [("session_id", "string"), ("customer_id", "long"), ("seconds", "int")],
    ),
}
SUMMARY_FIELDS = [("order_date", "date"), ("revenue", "decimal(18,2)")]
ORDERS_NEW_FIELD = ("channel", "string")  # orders_daily's column added mid-week
SCHEMA_CHANGE_DAY = 3
# dbt model -> its inputs (lakehouse names, or another model)
DBT_MODELS = {
    "stg_orders": ["sales.orders_daily"],
    "stg_customers": ["sales.customers"],
    "stg_sessions": ["web.sessions_daily"],
    "int_orders_enriched": ["stg_orders", "stg_customers"],
    "fct_revenue": ["int_orders_enriched", "sales.orders_summary"],
    "fct_sessions": ["stg_sessions"],
    "dim_customers": ["stg_customers"],
    "rpt_daily_kpis": ["fct_revenue", "fct_sessions", "dim_customers"],
}
OWNERS = {
    AIRFLOW_NS: "team:orchestration",
    SPARK_NS: "team:data-platform",
    DBT_NS: "team:analytics-engineering",
    TRINO_JOBS_NS: "team:bi",
}

Name = tuple[str, str]


def lakehouse(table: str) -> Name:
    """A table as Trino (and dbt on Trino) names it."""
    return (TRINO, f"lakehouse.{table}")


def model_table(model: str) -> str:
    return f"analytics.{model}"


@dataclass
class Week:
    """The events (eventTime order) and named handles of what is interesting in them."""

    events: list[dict[str, Any]]
    datasets: dict[str, Name] = field(default_factory=dict)
    jobs: dict[str, Name] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)
    # when orders_daily first had its new column
    schema_changed_at: dt.datetime | None = None
    end: dt.datetime = START  # the last eventTime


def _iso(t: dt.datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ownership(namespace: str, producer: str) -> dict[str, Any]:
    return {
        "ownership": facet(
            producer,
            "1-0-1/OwnershipJobFacet.json#/$defs/OwnershipJobFacet",
            owners=[{"name": OWNERS[namespace], "type": "MAINTAINER"}],
        )
    }


def _dataset(name: Name, **facets: Any) -> dict[str, Any]:
    return {"namespace": name[0], "name": name[1], "facets": facets}


class _Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.events: list[dict[str, Any]] = []
        self.week = Week(events=self.events)

    def run_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def fails(self, day: int) -> bool:
        """A random failure (about 5 % of runs), never on the last day (its failures are
        the planned ones)."""
        return self.rng.random() < FAILURE_RATE and day < DAYS - 1

    def run(
        self,
        producer: str,
        job: Name,
        start: dt.datetime,
        seconds: float,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        failed: bool = False,
        parent: tuple[str, Name] | None = None,
        running: bool = False,
    ) -> str:
        """A run's START, (RUNNING,) and COMPLETE or FAIL events; its id."""
        run = self.run_id()
        facets: dict[str, Any] = {}
        if parent is not None:
            facets["parent"] = facet(
                producer,
                "1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
                run={"runId": parent[0]},
                job={"namespace": parent[1][0], "name": parent[1][1]},
            )
        job_facets = _ownership(job[0], producer)
        end = start + dt.timedelta(seconds=seconds)
        kinds = [("START", start)]
        if running:
            kinds.append(("RUNNING", start + dt.timedelta(seconds=seconds / 2)))
        kinds.append(("FAIL" if failed else "COMPLETE", end))
        for kind, at in kinds:
            run_facets = dict(facets)
            if kind == "FAIL":
                run_facets["errorMessage"] = facet(
                    producer,
                    "1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
                    message=f"{job[1]} failed",
                    programmingLanguage="JAVA",
                )
            event = run_event(kind, _iso(at), producer, job, run, inputs, outputs, run_facets)
            event["job"]["facets"] = job_facets
            self.events.append(event)
        return run

    def dag_event(self, kind: str, at: dt.datetime, dag: Name, run: str) -> None:
        event = run_event(kind, _iso(at), AIRFLOW_PRODUCER, dag, run, [], [])
        event["job"]["facets"] = _ownership(dag[0], AIRFLOW_PRODUCER)
        self.events.append(event)

    def cycle(self, day: int, hour: int, last: bool) -> None:
        week = self.week
        at = START + dt.timedelta(days=day, hours=hour)
        dag = (AIRFLOW_NS, DAG)
        dag_run = self.run_id()
        task_runs = []

        def task(i: int, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> None:
            job = (AIRFLOW_NS, f"{DAG}.{TASKS[i]}")
            week.jobs.setdefault(TASKS[i], job)
            task_runs.append(
                self.run(
                    AIRFLOW_PRODUCER,
                    job,
                    at + dt.timedelta(minutes=TASK_MINUTES[i], seconds=1),
                    120,
                    inputs,
                    outputs,
                    failed=self.fails(day),
                    parent=(dag_run, dag),
                )
            )

        self.dag_event("START", at, dag, dag_run)
        for i, source in enumerate(SOURCES):
            src = (SOURCE_DB, f"shop.public.{source}")
            raw = (WAREHOUSE, f"raw.db/{source}")
            task(
                i,
                [_dataset(src, schema=schema_facet(AIRFLOW_PRODUCER, SOURCES[source]))],
                [_dataset(raw)],
            )
        # Spark, triggered by run_spark
        task(3, [], [])
        for n, (job_name, (raw, path, hive, fields)) in enumerate(SPARK.items()):
            job = (SPARK_NS, f"{job_name}.execute_insert_into_hadoop_fs_relation_command")
            week.jobs.setdefault(job_name, job)
            if job_name == "orders_etl" and day >= SCHEMA_CHANGE_DAY:
                fields = [*fields, ORDERS_NEW_FIELD]
            table = (WAREHOUSE, path)
            week.datasets.setdefault(path.split("/")[-1], table)
            week.datasets.setdefault(f"{path.split('/')[-1]}_hive", (HIVE, hive))
            symlinks = facet(
                SPARK_PRODUCER,
                "1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
                identifiers=[{"namespace": HIVE, "name": hive, "type": "TABLE"}],
            )
            output = _dataset(table, schema=schema_facet(SPARK_PRODUCER, fields), symlinks=symlinks)
            start = at + dt.timedelta(minutes=16 + n * 2)
            failed = (last and job_name == "customers_etl") or self.fails(day)
            run = self.run(
                SPARK_PRODUCER, job, start, 90, [_dataset((WAREHOUSE, raw))], [output],
                failed=failed, running=True,
            )  # fmt: skip
            if last and job_name == "customers_etl":
                week.runs["failed_spark_run"] = run
            if (
                job_name == "orders_etl"
                and day == SCHEMA_CHANGE_DAY
                and week.schema_changed_at is None
            ):
                week.schema_changed_at = start + dt.timedelta(seconds=90)
                week.runs["schema_change_run"] = run
        # Trino: a query (a job of its own) summarises the orders
        query_at = at + dt.timedelta(minutes=25)
        query = (
            TRINO_JOBS_NS,
            f"{query_at:%Y%m%d_%H%M%S}_{self.rng.randrange(10**5):05d}_{self.rng.randrange(36**5):07x}",
        )
        daily = lakehouse("sales.orders_daily")
        daily_fields = [
            ("order_id", "bigint"),
            ("customer_id", "bigint"),
            ("amount", "decimal(18,2)"),
        ]
        summary = lakehouse("sales.orders_summary")
        week.datasets.setdefault("orders_summary", summary)
        week.datasets.setdefault("orders_daily_trino", daily)
        failed = last or self.fails(day)
        run = self.run(
            TRINO_PRODUCER, query, query_at, 40,
            [_dataset(daily, schema=schema_facet(TRINO_PRODUCER, daily_fields))],
            [_dataset(summary, schema=schema_facet(TRINO_PRODUCER, SUMMARY_FIELDS))],
            failed=failed,
        )  # fmt: skip
        if last:
            week.runs["failed_trino_run"] = run
            week.jobs["failed_trino_query"] = query
        # dbt, triggered by run_dbt
        task(4, [], [])
        for n, (model, sources) in enumerate(DBT_MODELS.items()):
            inputs = [
                _dataset(lakehouse(model_table(s) if s in DBT_MODELS else s)) for s in sources
            ]
            out = lakehouse(model_table(model))
            week.datasets.setdefault(model, out)
            job = (DBT_NS, f"analytics.{model}")
            week.jobs.setdefault(model, job)
            fields = [("id", "bigint"), ("value", "double")]
            lineage = facet(
                DBT_PRODUCER,
                "1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
                fields={
                    f: {
                        "inputFields": [
                            {
                                "namespace": i["namespace"],
                                "name": i["name"],
                                "field": f,
                                "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                            }
                            for i in inputs
                        ]
                    }
                    for f, _ in fields
                },
            )
            output = _dataset(out, schema=schema_facet(DBT_PRODUCER, fields), columnLineage=lineage)
            self.run(
                DBT_PRODUCER, job, at + dt.timedelta(minutes=40, seconds=30 * n), 25,
                inputs, [output], failed=self.fails(day),
            )  # fmt: skip
        report = (REPORTS, "daily_kpis.csv")
        week.datasets.setdefault("kpi_report", report)
        task(5, [_dataset(lakehouse(model_table("rpt_daily_kpis")))], [_dataset(report)])
        end = at + dt.timedelta(minutes=60)
        self.dag_event("COMPLETE", end, dag, dag_run)
        self.week.jobs.setdefault("dag", dag)

    def bi_queries(self, day: int) -> None:
        """The BI service reads the KPIs every hour (a grouped Trino job)."""
        job = (TRINO_JOBS_NS, "superset.bi_svc")
        self.week.jobs.setdefault("bi_svc", job)
        for hour in range(24):
            at = START + dt.timedelta(days=day, hours=hour, minutes=50)
            kpis = lakehouse(model_table("rpt_daily_kpis"))
            self.run(TRINO_PRODUCER, job, at, 3, [_dataset(kpis)], [], failed=self.fails(day))


def week(seed: int = 48) -> Week:
    """The week's events (in eventTime order) and its handles."""
    generator = _Generator(seed)
    for day in range(DAYS):
        for hour in CYCLE_HOURS:
            generator.cycle(day, hour, last=day == DAYS - 1 and hour == CYCLE_HOURS[-1])
        generator.bi_queries(day)
    generator.events.sort(key=lambda e: e["eventTime"])
    generator.week.end = dt.datetime.fromisoformat(generator.events[-1]["eventTime"])
    return generator.week
