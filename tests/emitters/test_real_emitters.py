"""Real emitters, configured the way their docs show, against the real `metastore api` and
`metastore projector`: Airflow's OpenLineage provider (`airflow dags test`) and `dbt-ol run`,
once with the endpoint set to ingest/openlineage and once with nothing but the URL and the
API key (the clients' default path, api/v1/lineage): for Airflow both in its own
AIRFLOW__OPENLINEAGE__TRANSPORT and in the OpenLineage client's OPENLINEAGE_URL and
OPENLINEAGE_API_KEY, which the provider falls back to. What they sent must all be stored,
and the read API must show the jobs, their parents, the tables, lineage and column lineage.

The emitters live in their own venvs (pinned in requirements-airflow.txt and
requirements-dbt.txt), which `make test-emitters` builds and caches and passes in as
METASTORE_TEST_AIRFLOW_BIN and METASTORE_TEST_DBT_BIN; without them this module is skipped.
METASTORE_TEST_EMITTERS_REPORT, when set, is where a summary of each trial is written (what
each emitter sent, what the read API showed).
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from tests.conftest import Server
from tests.support import Process, running

HERE = Path(__file__).resolve().parent
AIRFLOW_BIN = os.environ.get("METASTORE_TEST_AIRFLOW_BIN")
DBT_BIN = os.environ.get("METASTORE_TEST_DBT_BIN")
REPORT = os.environ.get("METASTORE_TEST_EMITTERS_REPORT")

pytestmark = pytest.mark.skipif(
    not (AIRFLOW_BIN and DBT_BIN), reason="the real emitters run with `make test-emitters`"
)

INGEST_TOKEN = "emitters-ingest-token"
READ_TOKEN = "emitters-read-token"
EXPORT_TOKEN = "emitters-export-token"
AIRFLOW_PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.3"
DBT_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/dbt"


@dataclass(frozen=True)
class Configuration:
    """How the emitters are pointed at us, and where their POSTs must arrive."""

    name: str
    endpoint: str | None  # None: left at the clients' default
    path: str  # where the events arrive
    airflow_namespace: str  # the provider's default is "default"
    dbt_namespace: str  # dbt-ol's default is "dbt"
    airflow_transport: bool = True  # AIRFLOW__OPENLINEAGE__TRANSPORT, else OPENLINEAGE_URL


CONFIGURATIONS = [
    Configuration("endpoint-set", "ingest/openlineage", "/ingest/openlineage", "pipelines", "shop"),
    Configuration("defaults", None, "/api/v1/lineage", "default", "dbt"),
    Configuration("client-env", None, "/api/v1/lineage", "default", "dbt", airflow_transport=False),
]


@dataclass
class Trial:
    configuration: Configuration
    api: Process
    work_db: str  # the database holding the tables a and b and the dbt models
    datasets_namespace: str  # postgres://host:port, as both emitters name it
    airflow_sent: collections.Counter[str]  # event types, from the emitter's own log
    dbt_sent: int  # from dbt-ol's own log
    events: list[dict[str, Any]]  # what the export feed gives back
    read: dict[str, Any] = field(default_factory=dict)  # what the read API showed

    def get(self, path: str, **params: Any) -> Any:
        answer = httpx.get(
            self.api.base_url + "/api/v1" + path,
            params=params,
            headers={"Authorization": f"Bearer {READ_TOKEN}"},
            timeout=30,
        )
        assert answer.status_code == 200, (path, answer.text)
        return answer.json()

    def job(self, namespace: str, name: str) -> dict[str, Any]:
        items = self.get("/jobs", namespace=namespace, limit=500)["items"]
        (summary,) = [j for j in items if j["name"] == name]
        return self.get(f"/jobs/{summary['id']}")  # type: ignore[no-any-return]

    def dataset(self, name: str) -> dict[str, Any]:
        (summary,) = self.get("/datasets", namespace=self.datasets_namespace, name=name)["items"]
        return self.get(f"/datasets/{summary['id']}")  # type: ignore[no-any-return]

    def table(self, schema_table: str) -> str:
        return f"{self.work_db}.{schema_table}"


def _transport(configuration: Configuration, url: str) -> dict[str, Any]:
    transport: dict[str, Any] = {
        "type": "http",
        "url": url,
        "auth": {"type": "api_key", "apiKey": INGEST_TOKEN},
    }
    if configuration.endpoint:
        transport["endpoint"] = configuration.endpoint
    return transport


def _clean_env(bin_dir: str, home: Path) -> dict[str, str]:
    """A bare environment: the emitter's venv first on PATH, nothing of ours."""
    return {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
    }


def _run(command: list[str], env: dict[str, str], cwd: Path, log: Path) -> str:
    with log.open("wb") as out:
        done = subprocess.run(
            command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=600
        )
    output = log.read_text(errors="replace")
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{output}"
    return output


def run_airflow(
    configuration: Configuration, api_url: str, work_url: str, tmp: Path
) -> collections.Counter[str]:
    """`airflow dags test copy_a_to_b`; the event types the provider says it emitted."""
    assert AIRFLOW_BIN is not None
    home = tmp / "airflow"
    home.mkdir()
    env = {
        **_clean_env(AIRFLOW_BIN, home),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(HERE / "airflow_dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__USAGE_DATA_COLLECTION__ENABLED": "False",
        "AIRFLOW_CONN_WORK": work_url,
    }
    if configuration.airflow_transport:
        env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(_transport(configuration, api_url))
    else:  # the OpenLineage client's own variables, which the provider falls back to
        env["OPENLINEAGE_URL"] = api_url
        env["OPENLINEAGE_API_KEY"] = INGEST_TOKEN
    if configuration.airflow_namespace != "default":
        env["AIRFLOW__OPENLINEAGE__NAMESPACE"] = configuration.airflow_namespace
    _run([f"{AIRFLOW_BIN}/airflow", "db", "migrate"], env, home, tmp / "airflow-db.log")
    output = _run(
        [f"{AIRFLOW_BIN}/airflow", "dags", "test", "copy_a_to_b"], env, home, tmp / "airflow.log"
    )
    assert "Failed to emit" not in output, output
    return collections.Counter(
        re.findall(r"Successfully emitted OpenLineage `(\w+)` event", output)
    )


def run_dbt(
    configuration: Configuration, api_url: str, server: Server, dbname: str, tmp: Path
) -> int:
    """`dbt-ol run` on the two-model project; how many events dbt-ol says it emitted."""
    assert DBT_BIN is not None
    project = tmp / "dbt_project"
    shutil.copytree(HERE / "dbt_project", project)
    profile = {
        "shop": {
            "target": "ci",
            "outputs": {
                "ci": {
                    "type": "postgres",
                    "host": server.host,
                    "port": server.port,
                    "user": server.user,
                    "password": server.password or "",
                    "dbname": dbname,
                    "schema": "analytics",
                    "threads": 1,
                }
            },
        }
    }
    (project / "profiles.yml").write_text(json.dumps(profile))  # YAML reads JSON
    env = {
        **_clean_env(DBT_BIN, tmp),
        "DBT_PROFILES_DIR": str(project),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "OPENLINEAGE_URL": api_url,
        "OPENLINEAGE_API_KEY": INGEST_TOKEN,
    }
    if configuration.endpoint:
        env["OPENLINEAGE_ENDPOINT"] = configuration.endpoint
    if configuration.dbt_namespace != "dbt":
        env["OPENLINEAGE_NAMESPACE"] = configuration.dbt_namespace
    output = _run([f"{DBT_BIN}/dbt-ol", "run"], env, project, tmp / "dbt.log")
    emitted = re.search(r"Emitted (\d+) OpenLineage events", output)
    assert emitted, output
    return int(emitted.group(1))


def exported(api: Process) -> list[dict[str, Any]]:
    answer = httpx.get(
        api.base_url + "/export/openlineage/events",
        params={"limit": 1000},
        headers={"Authorization": f"Bearer {EXPORT_TOKEN}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["events"]  # type: ignore[no-any-return]


def wait_until_folded(api: Process, count: int) -> None:
    """Until every projection has folded all `count` stored events (none dead-lettered)."""
    deadline = time.monotonic() + 60
    while True:
        status = httpx.get(
            api.base_url + "/api/v1/status",
            headers={"Authorization": f"Bearer {READ_TOKEN}"},
            timeout=10,
        ).json()
        projections = status["projections"]
        if status["log"]["events"] == count and all(
            p["events_folded"] == count and p["lag_events"] == 0 for p in projections
        ):
            assert [p["dead_letters"] for p in projections] == [0] * len(projections), status
            return
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


@pytest.fixture(scope="module", params=CONFIGURATIONS, ids=lambda c: c.name)
def trial(
    request: pytest.FixtureRequest,
    pg_server: Server,
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Trial]:
    configuration: Configuration = request.param
    tmp = tmp_path_factory.mktemp(configuration.name)
    env = {
        "METASTORE_AUTH": "enabled",
        "METASTORE_INGEST_TOKENS": INGEST_TOKEN,
        "METASTORE_READ_TOKENS": READ_TOKEN,
        "METASTORE_EXPORT_TOKENS": EXPORT_TOKEN,
    }
    with (
        pg_server.database("emitters", template_db) as url,
        pg_server.database("work") as work_url,
        running("api", url, tmp, env=env) as api,
        running("projector", url, tmp, env=env),
    ):
        with psycopg.connect(work_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE a (id integer PRIMARY KEY, name text, amount numeric)")
            conn.execute("INSERT INTO a VALUES (1, 'apples', 1.5), (2, 'pears', 2.5)")
            conn.execute("CREATE TABLE b (id integer, name text, amount numeric)")
        work_db = urlsplit(work_url).path.lstrip("/")
        airflow_sent = run_airflow(configuration, api.base_url, work_url, tmp)
        dbt_sent = run_dbt(configuration, api.base_url, pg_server, work_db, tmp)
        events = exported(api)
        wait_until_folded(api, len(events))
        yield Trial(
            configuration=configuration,
            api=api,
            work_db=work_db,
            datasets_namespace=f"postgres://{pg_server.host}:{pg_server.port}",
            airflow_sent=airflow_sent,
            dbt_sent=dbt_sent,
            events=events,
        )


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[dict[str, Any]]:
    """What each trial sent and what the read API showed, written at the end of the module."""
    summary: dict[str, Any] = {}
    yield summary
    if REPORT and summary:
        Path(REPORT).parent.mkdir(parents=True, exist_ok=True)
        Path(REPORT).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def _sent_by(events: list[dict[str, Any]], producer: str) -> list[dict[str, Any]]:
    return [e for e in events if e["producer"] == producer]


def test_every_event_the_emitters_sent_is_stored_from_the_path_they_used(
    trial: Trial, report: dict[str, Any]
) -> None:
    airflow = _sent_by(trial.events, AIRFLOW_PRODUCER)
    dbt = _sent_by(trial.events, DBT_PRODUCER)
    assert len(airflow) + len(dbt) == len(trial.events), {e["producer"] for e in trial.events}
    assert collections.Counter(e["eventType"] for e in airflow) == trial.airflow_sent
    assert len(dbt) == trial.dbt_sent
    # Every POST arrived where the configuration says and was answered 200.
    posts = re.findall(r"method=POST path=(\S+) status=(\d+)", trial.api.output())
    assert posts and set(posts) == {(trial.configuration.path, "200")}, set(posts)
    assert len(posts) == len(trial.events)
    report.setdefault(trial.configuration.name, {})["sent"] = {
        "posted to": trial.configuration.path,
        "airflow configured with": (
            "AIRFLOW__OPENLINEAGE__TRANSPORT"
            if trial.configuration.airflow_transport
            else "OPENLINEAGE_URL, OPENLINEAGE_API_KEY"
        ),
        "endpoint": trial.configuration.endpoint or "(not set)",
        "job namespaces": {
            "airflow": trial.configuration.airflow_namespace,
            "dbt": trial.configuration.dbt_namespace,
        },
        "airflow": {
            "producers": sorted({e["producer"] for e in airflow}),
            "by type": dict(collections.Counter(e["eventType"] for e in airflow)),
            "schemaURL": sorted({e.get("schemaURL", "-") for e in airflow}),
        },
        "dbt": {
            "producers": sorted({e["producer"] for e in dbt}),
            "by type": dict(collections.Counter(e["eventType"] for e in dbt)),
            "schemaURL": sorted({e.get("schemaURL", "-") for e in dbt}),
        },
    }


def test_the_dag_and_its_tasks_are_jobs_with_their_parent(
    trial: Trial, report: dict[str, Any]
) -> None:
    namespace = trial.configuration.airflow_namespace
    dag = trial.job(namespace, "copy_a_to_b")
    copy = trial.job(namespace, "copy_a_to_b.copy")
    check = trial.job(namespace, "copy_a_to_b.check")
    assert (dag["job_type"], dag["integration"], dag["parent"]) == ("DAG", "AIRFLOW", None)
    for task in (copy, check):
        assert (task["job_type"], task["integration"]) == ("TASK", "AIRFLOW")
        parent = task["parent"]
        assert (parent["id"], parent["namespace"], parent["name"]) == (
            dag["id"],
            namespace,
            "copy_a_to_b",
        )
        # The parent reference carries the DAG's latest run, as the job page shows it.
        assert parent["latest_run"]["id"] == dag["latest_run"]["id"]
        assert task["latest_run"]["state"] == "COMPLETE"
    assert {"copy_a_to_b.copy", "copy_a_to_b.check"} <= {c["name"] for c in dag["children"]}
    # The task runs hang under the DAG run.
    dag_run = trial.get(f"/runs/{dag['latest_run']['id']}")
    copy_run = trial.get(f"/runs/{copy['latest_run']['id']}")
    assert dag_run["state"] == "COMPLETE"
    assert copy_run["parent"]["id"] == dag_run["id"]
    assert copy_run["root"]["id"] == dag_run["id"]
    assert {c["id"] for c in dag_run["children"]} >= {
        copy["latest_run"]["id"],
        check["latest_run"]["id"],
    }
    report.setdefault(trial.configuration.name, {})["airflow jobs"] = {
        j["name"]: {
            "type": j["job_type"],
            "parent": j["parent"] and j["parent"]["name"],
            "children": sorted(c["name"] for c in j["children"]),
            "latest run": {k: j["latest_run"][k] for k in ("state", "started_at", "ended_at")},
        }
        for j in (dag, copy, check)
    }


def test_the_tables_are_datasets_with_their_schema(trial: Trial, report: dict[str, Any]) -> None:
    a = trial.dataset(trial.table("public.a"))
    b = trial.dataset(trial.table("public.b"))
    copy = trial.job(trial.configuration.airflow_namespace, "copy_a_to_b.copy")
    columns = [("id", "int4"), ("name", "text"), ("amount", "numeric")]
    # b's schema is what the copy wrote; a's only what the copy saw reading it (a reader's
    # schema is an observation, never a version).
    assert [(f["name"], f["type"]) for f in b["fields"]] == columns
    assert a["fields"] is None
    assert [[(f["name"], f["type"]) for f in s["fields"]] for s in a["reader_schemas"]] == [columns]
    assert copy["id"] in {c["job"]["id"] for c in a["consumers"]}
    assert copy["id"] in {w["job"]["id"] for w in b["producers"]}
    assert ([d["id"] for d in copy["inputs"]], [d["id"] for d in copy["outputs"]]) == (
        [a["id"]],
        [b["id"]],
    )
    report.setdefault(trial.configuration.name, {})["datasets"] = sorted(
        f"{d['namespace']} {d['name']}"
        for d in trial.get("/datasets", namespace=trial.datasets_namespace, limit=500)["items"]
    )


def _named_edges(graph: dict[str, Any]) -> set[tuple[str, str]]:
    return {(edge["from"]["name"], edge["to"]["name"]) for edge in graph["edges"]}


def test_a_flows_through_the_task_into_b(trial: Trial, report: dict[str, Any]) -> None:
    a = trial.dataset(trial.table("public.a"))
    graph = trial.get("/lineage", node=f"dataset:{a['id']}", direction="downstream", depth=2)
    edges = _named_edges(graph)
    assert (trial.table("public.a"), "copy_a_to_b.copy") in edges
    assert ("copy_a_to_b.copy", trial.table("public.b")) in edges
    report.setdefault(trial.configuration.name, {})["lineage downstream of a"] = sorted(
        f"{f} -> {t}" for f, t in edges
    )


def _field_edges(lineage: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {
        (e["from"]["name"], e["from"]["field"], e["to"]["name"], e["to"]["field"])
        for e in lineage["edges"]
    }


def test_the_copy_has_column_lineage(trial: Trial, report: dict[str, Any]) -> None:
    b = trial.dataset(trial.table("public.b"))
    lineage = trial.get(f"/datasets/{b['id']}/column-lineage")
    edges = _field_edges(lineage)
    a_, b_ = trial.table("public.a"), trial.table("public.b")
    assert {(a_, c, b_, c) for c in ("id", "name", "amount")} <= edges
    # Every job that reported a field edge is named, not only the latest: under `dags test`
    # the provider reports the copy's query again from the later task.
    for edge in lineage["edges"]:
        assert "copy_a_to_b.copy" in {j["name"] for j in edge["jobs"]}, edge
    report.setdefault(trial.configuration.name, {})["column lineage of b"] = sorted(
        f"{f}.{ff} -> {t}.{tf}" for f, ff, t, tf in edges
    )


def test_the_dbt_models_are_jobs_under_the_dbt_run_with_their_lineage(
    trial: Trial, report: dict[str, Any]
) -> None:
    namespace = trial.configuration.dbt_namespace
    parent = trial.job(namespace, "dbt-run-shop")
    stg = trial.job(namespace, f"{trial.work_db}.analytics.shop.stg_a")
    totals = trial.job(namespace, f"{trial.work_db}.analytics.shop.a_totals")
    assert (parent["job_type"], parent["integration"], parent["parent"]) == ("JOB", "DBT", None)
    for model in (stg, totals):
        assert (model["job_type"], model["integration"]) == ("MODEL", "DBT")
        assert model["parent"]["id"] == parent["id"]
    a, stg_table, totals_table = (
        trial.table("public.a"),
        trial.table("analytics.stg_a"),
        trial.table("analytics.a_totals"),
    )
    end = trial.dataset(totals_table)
    graph = trial.get("/lineage", node=f"dataset:{end['id']}", direction="upstream", depth=4)
    assert {
        (a, stg["name"]),
        (stg["name"], stg_table),
        (stg_table, totals["name"]),
        (totals["name"], totals_table),
    } <= _named_edges(graph)
    columns = _field_edges(
        trial.get(f"/datasets/{end['id']}/column-lineage", direction="upstream", depth=2)
    )
    assert {
        (stg_table, "amount", totals_table, "total"),
        (stg_table, "name", totals_table, "name"),
        (a, "amount", stg_table, "amount"),
    } <= columns
    report.setdefault(trial.configuration.name, {})["dbt"] = {
        "jobs": {
            j["name"]: {"type": j["job_type"], "parent": j["parent"] and j["parent"]["name"]}
            for j in (parent, stg, totals)
        },
        "lineage upstream of a_totals": sorted(f"{f} -> {t}" for f, t in _named_edges(graph)),
        "column lineage of a_totals": sorted(f"{f}.{ff} -> {t}.{tf}" for f, ff, t, tf in columns),
    }
