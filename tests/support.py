"""Helpers for tests that run the real processes: `metastore api` / `projector` as children."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NoReturn

import httpx
import psycopg
import pytest
from psycopg import sql

from metastore.embedded_pg import free_port
from projections.runner import catch_up
from projections.schema import create_readmodel_tables
from tests.logdata import append

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = ROOT.parent / "shared" / "conformance"


def python_module(*args: str, timeout: float = 280) -> subprocess.CompletedProcess[str]:
    """`python -m <args>` in the checkout, its output captured (not checked)."""
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def conformance_files(folder: str) -> list[Path]:
    """The event files of a conformance folder, in emission order."""
    return sorted((CONFORMANCE / folder).glob("*.json"))


def conformance_events(folder: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_bytes()) for p in conformance_files(folder)]


def all_scenario_events() -> list[dict[str, Any]]:
    events = []
    for scenario in sorted(p.name for p in (CONFORMANCE / "scenarios").iterdir()):
        events += conformance_events(f"scenarios/{scenario}")
    return events


@contextmanager
def folded_scenarios(pg_server: Any, template_db: str, prefix: str) -> Iterator[str]:
    """A new database holding every conformance scenario, folded; its URL."""
    with pg_server.database(prefix, template_db) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            append(conn, all_scenario_events())
        catch_up(url)
        yield url


def skip_or_fail_in_ci(message: str) -> NoReturn:
    """What a test needs is missing: skipped on a developer's machine, failed when CI is set."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


class Process:
    """A `metastore <command>` child process."""

    def __init__(self, popen: subprocess.Popen[bytes], base_url: str, log_path: Path) -> None:
        self.popen = popen
        self.base_url = base_url
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        self.popen.wait(timeout=30)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def start_process(
    command: str,
    database_url: str,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    wait_path: str | None = "/healthz",
    timeout: float = 30.0,
    verify: ssl.SSLContext | None = None,
) -> Process:
    """`verify`: the process serves HTTPS, and this context trusts its certificate."""
    port = port or free_port()
    full_env = {
        **os.environ,
        "METASTORE_DATABASE_URL": database_url,
        "METASTORE_HOST": "127.0.0.1",
        "METASTORE_PORT": str(port),
        "METASTORE_PROJECTOR_PORT": str(port),
        "METASTORE_AUTH": "disabled",
        "METASTORE_LOG_LEVEL": "info",
        **(env or {}),
    }
    log_path = log_dir / f"{command}-{port}.log"
    with log_path.open("wb") as log_file:
        popen = subprocess.Popen(
            [sys.executable, "-m", "metastore", command],
            env=full_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    scheme = "https" if verify is not None else "http"
    process = Process(popen, f"{scheme}://127.0.0.1:{port}", log_path)
    if wait_path is not None:
        deadline = time.monotonic() + timeout
        while True:
            if popen.poll() is not None:
                raise RuntimeError(f"metastore {command} exited:\n{process.output()}")
            try:
                answer = httpx.get(process.base_url + wait_path, timeout=1, verify=verify or True)
                if answer.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                process.stop()
                raise RuntimeError(f"metastore {command} did not start:\n{process.output()}")
            time.sleep(0.05)
    return process


@contextmanager
def running(command: str, database_url: str, log_dir: Path, **kwargs: Any) -> Iterator[Process]:
    process = start_process(command, database_url, log_dir, **kwargs)
    try:
        yield process
    finally:
        process.stop()


@contextmanager
def serving(
    pg_server: Any,
    template_db: str,
    log_dir: Path,
    prefix: str,
    env: Mapping[str, str] | None = None,
    *,
    projector: bool = True,
    path: str = "",
    catalogs: str | None = None,
) -> Iterator[tuple[str, Process, httpx.Client]]:
    """A fresh migrated database with `metastore api` (and `metastore projector`, unless
    not wanted) on it, no tokens unless `env` says, the catalog map `catalogs` if given,
    and a client of the API below `path`: (database URL, api, client)."""
    env = {"METASTORE_AUTH": "disabled", **(env or {})}
    if catalogs is not None:
        env |= catalogs_env(log_dir, catalogs)
    with ExitStack() as stack:
        url = stack.enter_context(pg_server.database(prefix, template_db))
        api = stack.enter_context(running("api", url, log_dir, env=env))
        if projector:
            stack.enter_context(running("projector", url, log_dir, env=env))
        client = stack.enter_context(httpx.Client(base_url=api.base_url + path, timeout=30))
        yield url, api, client


@contextmanager
def open_service(
    pg_server: Any,
    template_db: str,
    log_dir: Path,
    prefix: str,
    env: Mapping[str, str] | None = None,
    catalogs: str | None = None,
) -> Iterator[tuple[Process, httpx.Client]]:
    """`serving` with its projector: the api and a client of it."""
    with serving(pg_server, template_db, log_dir, prefix, env, catalogs=catalogs) as (
        _,
        api,
        client,
    ):
        yield api, client


def catalogs_env(folder: Path, text: str) -> dict[str, str]:
    """The environment that points the projector at a catalog map of `text`, written to
    `folder`/catalogs.yaml."""
    path = folder / "catalogs.yaml"
    path.write_text(text)
    return {"METASTORE_CATALOGS_FILE": str(path)}


def projector_at_start(
    env: Mapping[str, str], unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`metastore projector` with `env` on a database nobody answers at, and none of this
    process's METASTORE_ variables (nor those starting with `unset`): what it says and how
    it exits before it would connect."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", *unset))}
    return subprocess.run(
        [sys.executable, "-m", "metastore", "projector"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "METASTORE_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", **env},
        check=False,
    )


class Api:
    """The read API of a service the test posts events to one at a time, at the clients'
    default path, and reads 200 answers from; lookups by name in its namespaces."""

    def __init__(self, client: httpx.Client, namespace: str, dataset_namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.dataset_namespace = dataset_namespace

    def post(self, events: list[dict[str, Any]]) -> None:
        for e in events:
            answer = self.client.post("/api/v1/lineage", json=e)
            assert answer.status_code == 200, answer.text
        wait_until_folded(self.client)

    def get(self, path: str, **params: Any) -> Any:
        answer = self.client.get("/api/v1" + path, params=params)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def dataset_id(self, name: str, namespace: str | None = None) -> str:
        namespace = namespace or self.dataset_namespace
        (item,) = self.get("/datasets", namespace=namespace, name=name)["items"]
        return item["id"]  # type: ignore[no-any-return]

    def job_id(self, name: str) -> str:
        (item,) = self.get("/jobs", namespace=self.namespace, q=name)["items"]
        return item["id"]  # type: ignore[no-any-return]


def cadences_sql(prefix: str, jobs: int, namespace: str, late: str) -> str:
    """An INSERT of hourly learned cadences (job_cadence) for the jobs md5(`prefix` || i)
    of i from 1 to `jobs`, in namespace `namespace` (an SQL expression of i): late a day
    ago where `late` (a condition on i) holds, else due tomorrow."""
    return f"""
INSERT INTO readmodel.job_cadence (job_id, namespace, basis, cadence, period_seconds,
    delay_seconds, tolerance_seconds, slots, last_expected, next_expected, late_at, missed_at)
SELECT md5('{prefix}' || i)::uuid, {namespace}, 'nominal', 'hourly', 3600, 0, 600, 10,
       t - interval '1 hour', t, t + interval '10 minutes', t + interval '70 minutes'
FROM generate_series(1, {jobs}) i
CROSS JOIN LATERAL (SELECT CASE WHEN {late} THEN now() - interval '1 day'
                                ELSE now() + interval '1 day' END AS t) x"""


@contextmanager
def seeded_store(pg_server: Any, template_db: str, name: str, seed: list[str]) -> Iterator[str]:
    """A database `name` with the read-model tables, `seed`'s statements run on it: rows
    written straight into the read models, for reads whose subject is not the fold."""
    with pg_server.database(name, template_db) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            create_readmodel_tables(conn)
            for statement in seed:
                conn.execute(statement)
        yield url


@contextmanager
def reader_of(
    database_url: str, folder: Path, namespace: str, prefix: str
) -> Iterator[httpx.Client]:
    """An API on `database_url` whose caller (token `<prefix>bea`) may read `namespace`
    alone, and a client of its /api/v1 as that caller."""
    policy = {"read": [{"subjects": ["bea"], "namespaces": [namespace]}]}
    env = access_env(folder, policy, {"bea": []}, ["read"], prefix)
    with (
        running("api", database_url, folder, env=env) as api,
        httpx.Client(
            base_url=api.base_url + "/api/v1",
            timeout=30,
            headers={"Authorization": f"Bearer {prefix}bea"},
        ) as client,
    ):
        yield client


def access_env(
    folder: Path,
    policy: dict[str, Any],
    users: Mapping[str, list[str]],
    scopes: list[str],
    token_prefix: str,
) -> dict[str, str]:
    """Writes `policy` and a token per user (`<token_prefix><name>`, with its groups and
    `scopes`) into `folder`; the env that points an API at them."""
    tokens = [
        {"name": name, "scopes": scopes, "token": f"{token_prefix}{name}", "groups": groups}
        for name, groups in users.items()
    ]
    (folder / "tokens.json").write_text(json.dumps(tokens))
    (folder / "policy.json").write_text(json.dumps(policy))
    return {
        "METASTORE_TOKENS_FILE": str(folder / "tokens.json"),
        "METASTORE_POLICY_FILE": str(folder / "policy.json"),
    }


def bearer_clients(
    base_url: str, users: Mapping[str, Any], token_prefix: str
) -> dict[str, httpx.Client]:
    """A client of `base_url` per user, with its token (see access_env)."""
    return {
        name: httpx.Client(
            base_url=base_url,
            timeout=30,
            headers={"Authorization": f"Bearer {token_prefix}{name}"},
        )
        for name in users
    }


def every_page(
    client: httpx.Client, path: str, **params: Any
) -> tuple[list[dict[str, Any]], list[tuple[int, bool]]]:
    """Every item of the list at `path`, page by page, and each page's
    (total, total_is_exact)."""
    items: list[dict[str, Any]] = []
    totals = []
    while True:
        answer = client.get(path, params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        items += page["items"]
        totals.append((page["total"], page["total_is_exact"]))
        if page["next_cursor"] is None:
            return items, totals
        params = {**params, "cursor": page["next_cursor"]}


def wait_until_folded(
    client: httpx.Client, headers: Mapping[str, str] | None = None, timeout: float = 30
) -> None:
    """Waits until every projection has folded every readable event (none dead-lettered)."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.get("/api/v1/status", headers=headers).json()
        if all(p["lag_events"] == 0 for p in status["projections"]):
            assert all(p["dead_letters"] == 0 for p in status["projections"]), status
            return
        assert time.monotonic() < deadline, status
        time.sleep(0.1)


# --- the brief's example after a failed Trino run ----------------------------------------
# scenarios/seed_spark_trino (Spark writes sales.db/orders_daily, alias Hive's
# sales.orders_daily; Trino query 00042 reads it as lakehouse.sales.orders_daily and writes
# lakehouse.sales.orders_summary), then a dbt model reads the summary, and the next day's
# Trino query FAILs writing the summary with a new column. With BRIEF_CATALOGS the Trino
# names join their Hive names.
BRIEF_CATALOGS = """\
catalogs:
  - engine: 'trino://trino-coordinator-*:8443'
    catalog: lakehouse
    metastore: 'hive://hive-metastore:9083'
"""
TRINO = "trino://trino-coordinator-default-0.trino-coordinator-default.prod.svc.cluster.local:8443"
TRINO_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/trino"
DBT_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/dbt"
FAILED_TRINO_RUN = "0191a8e4-6b2d-7c10-9e55-2f7d3a1c9b42"
DBT_RUN = "0191a430-55a1-7d3e-8c21-6a9e0b4f7d13"
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def facet(producer: str, schema: str, **body: Any) -> dict[str, Any]:
    """A facet as producers write it: who wrote it, its schema under the facets' spec, its body."""
    return {
        "_producer": producer,
        "_schemaURL": f"https://openlineage.io/spec/facets/{schema}",
        **body,
    }


def schema_facet(producer: str, fields: list[tuple[str, str]]) -> dict[str, Any]:
    """A `schema` dataset facet of (name, type) fields."""
    return facet(
        producer,
        "1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
        fields=[{"name": n, "type": t} for n, t in fields],
    )


def ownership_facet(producer: str, owner: str) -> dict[str, Any]:
    """An `ownership` dataset facet naming one maintainer."""
    return facet(
        producer,
        "1-0-1/OwnershipDatasetFacet.json#/$defs/OwnershipDatasetFacet",
        owners=[{"name": owner, "type": "MAINTAINER"}],
    )


SUMMARY_V1 = [("order_date", "date"), ("region", "varchar"), ("revenue", "decimal(18,2)")]
SUMMARY_V2 = [*SUMMARY_V1, ("channel", "varchar")]


def run_event(
    kind: str,
    when: str,
    producer: str,
    job: tuple[str, str],
    run: str,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    run_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "eventType": kind,
        "eventTime": when,
        "producer": producer,
        "schemaURL": RUN_EVENT,
        "job": {"namespace": job[0], "name": job[1]},
        "run": {"runId": run, "facets": run_facets or {}},
        "inputs": inputs,
        "outputs": outputs,
    }


def failed_trino_events() -> list[dict[str, Any]]:
    """The brief's example (the seed, a dbt model on its summary, then a failed Trino run),
    in emission order."""
    summary = {"namespace": TRINO, "name": "lakehouse.sales.orders_summary"}
    daily = {"namespace": TRINO, "name": "lakehouse.sales.orders_daily"}
    read_summary = {
        **summary,
        "facets": {
            "schema": schema_facet(DBT_PRODUCER, SUMMARY_V1),
            "ownership": ownership_facet(DBT_PRODUCER, "team:sales-analytics"),
        },
    }
    revenue = {
        "namespace": TRINO,
        "name": "lakehouse.marts.revenue_by_region",
        "facets": {
            "schema": schema_facet(DBT_PRODUCER, [("region", "varchar"), ("revenue", "decimal")]),
            "ownership": ownership_facet(DBT_PRODUCER, "team:finance"),
        },
    }
    dbt = ("dbt://prod", "analytics.revenue_by_region")
    failed = ("prod-lineage", "20260903_101500_00051_cm7qz")
    attempted = {**summary, "facets": {"schema": schema_facet(TRINO_PRODUCER, SUMMARY_V2)}}
    error = facet(
        TRINO_PRODUCER,
        "1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
        message="Query exceeded per-node memory limit of 8GB",
        programmingLanguage="JAVA",
    )
    return [
        *conformance_events("scenarios/seed_spark_trino"),
        run_event(
            "START", "2026-09-02T11:00:00Z", DBT_PRODUCER, dbt, DBT_RUN, [read_summary], []
        ),
        run_event(
            "COMPLETE", "2026-09-02T11:02:30Z", DBT_PRODUCER, dbt, DBT_RUN,
            [read_summary], [revenue],
        ),
        run_event(
            "START", "2026-09-03T10:15:00.210Z", TRINO_PRODUCER, failed, FAILED_TRINO_RUN,
            [daily], [attempted],
        ),
        run_event(
            "FAIL", "2026-09-03T10:15:41.002Z", TRINO_PRODUCER, failed, FAILED_TRINO_RUN,
            [daily], [attempted], {"errorMessage": error},
        ),
    ]  # fmt: skip


README_SQL = re.compile(r"<!-- roles\.sql[^>]*-->\n```sql\n(.*?)```", re.S)


class ReadmeInstall:
    """The README's roles and database, under names of this test's own."""

    def __init__(self, pg_server: Any) -> None:
        self.pg_server = pg_server
        self.owner = f"ms{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.api = f"{self.owner}_api"
        self.projector = f"{self.owner}_projector"
        self.database = self.owner

    def statements(self, leave_out: str | tuple[str, ...] | None = None) -> list[str]:
        """The README's SQL block with our names, one statement (or `\\connect`) each."""
        match = README_SQL.search((ROOT / "README.md").read_text())
        assert match, "README.md has no <!-- roles.sql --> block"
        text = match.group(1)
        text = re.sub(r"\bmetastore_api\b", self.api, text)
        text = re.sub(r"\bmetastore_projector\b", self.projector, text)
        text = re.sub(r"\bmetastore\b", self.owner, text)
        statements: list[str] = []
        current: list[str] = []
        for line in text.splitlines():
            if line.startswith("--") or not line.strip():
                continue
            if line.startswith("\\connect "):
                statements.append(line.strip())
                continue
            current.append(line.strip())
            if line.rstrip().endswith(";"):
                statements.append(" ".join(current).rstrip(";"))
                current = []
        assert not current, f"a statement without its semicolon: {current}"
        return [s for s in statements if not (leave_out and s.startswith(leave_out))]

    def run_sql(self, leave_out: str | tuple[str, ...] | None = None) -> None:
        """As the test server's superuser, in `psql`'s manner (`\\connect` switches)."""
        conn = psycopg.connect(self.pg_server.url("postgres"), autocommit=True)
        try:
            for statement in self.statements(leave_out):
                if statement.startswith("\\connect "):
                    conn.close()
                    conn = psycopg.connect(
                        self.pg_server.url(statement.split()[1]), autocommit=True
                    )
                else:
                    conn.execute(statement)
        finally:
            conn.close()

    def url(self, role: str) -> str:
        netloc = f"{role}@{self.pg_server.host}:{self.pg_server.port}"
        return self.pg_server.parts._replace(netloc=netloc, path="/" + self.database).geturl()

    def migrate(
        self, *, as_role: str | None = None, roles: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`metastore migrate` as the owner (or `as_role`), told the process roles unless
        `roles` is False (one role for everything)."""
        env = {
            **os.environ,
            "METASTORE_DATABASE_URL": self.url(as_role or self.owner),
            "METASTORE_LOG_FORMAT": "text",
        }
        if roles:
            env |= {"METASTORE_API_ROLE": self.api, "METASTORE_PROJECTOR_ROLE": self.projector}
        return subprocess.run(
            [sys.executable, "-m", "metastore", "migrate"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )

    def drop(self) -> None:
        with psycopg.connect(self.pg_server.url("postgres"), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.database)
                )
            )
            for role in (self.api, self.projector, self.owner):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


# --- plans ----------------------------------------------------------------------------
AUTO_EXPLAIN = (
    ("session_preload_libraries", "auto_explain"),
    ("auto_explain.log_min_duration", "0"),
    ("auto_explain.log_analyze", "on"),
    ("auto_explain.log_timing", "off"),
    ("auto_explain.log_format", "json"),
)


def server_log(pg_server: Any) -> Path:
    """The log file of the suite's own PostgreSQL (a test that reads it is skipped on a
    server of another)."""
    if pg_server.embedded is None:
        pytest.skip("reads the server log of the suite's own PostgreSQL")
    return pg_server.embedded.logfile  # type: ignore[no-any-return]


@contextmanager
def _logged(
    url: str, log_file: Path, settings: tuple[tuple[str, str], ...]
) -> Iterator[Callable[[], str]]:
    """New sessions of database `url` take `settings`; yields a function giving the text
    the server logged to `log_file` since its previous call. Reset on leaving."""
    with psycopg.connect(url, autocommit=True) as conn:
        database = sql.Identifier(conn.info.dbname)
        for setting, value in settings:
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    database, sql.Identifier(*setting.split(".")), sql.Literal(value)
                )
            )
    offset = [log_file.stat().st_size]

    def logged() -> str:
        with log_file.open("rb") as log:
            log.seek(offset[0])
            raw = log.read()
        offset[0] += len(raw)
        return raw.decode(errors="replace")

    try:
        yield logged
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} RESET ALL").format(database))


@contextmanager
def plans_logged(url: str, log_file: Path) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """New sessions of database `url` log every statement's plan, with its actual rows, to
    the server log `log_file`; yields a function giving the read-model plans logged since
    its previous call. The settings are reset on leaving."""
    with _logged(url, log_file, AUTO_EXPLAIN) as logged:

        def plans() -> list[dict[str, Any]]:
            decoder = json.JSONDecoder()
            parts = logged().split("plan:\n")[1:]
            found = [decoder.raw_decode(part.lstrip())[0] for part in parts]
            return [p for p in found if "readmodel." in p["Query Text"]]

        yield plans


@contextmanager
def api_logging_plans(
    url: str, log_file: Path, folder: Path
) -> Iterator[tuple[Callable[[], list[dict[str, Any]]], httpx.Client]]:
    """plans_logged's function for database `url` and a client of an API on it (no auth)."""
    with (
        plans_logged(url, log_file) as logged,
        running("api", url, folder, env={"METASTORE_AUTH": "disabled"}) as api,
        httpx.Client(base_url=api.base_url + "/api/v1", timeout=30) as client,
    ):
        yield logged, client


@contextmanager
def statements_logged(url: str, log_file: Path) -> Iterator[Callable[[], int]]:
    """New sessions of database `url` log every statement they send (SETs too); yields a
    function counting those logged since its previous call: a read's round trips."""
    with _logged(url, log_file, (("log_statement", "all"),)) as logged:
        yield lambda: len(re.findall(r"LOG:  (?:statement|execute [^:]*): ", logged()))


def rows_read(plans: list[dict[str, Any]], bitmaps: bool = True) -> Iterator[tuple[int, str]]:
    """(rows a node read in a loop, the node and its statement, shortened) for every node of
    `plans` (plans_logged's); `bitmaps`: Bitmap Index Scans' index entries too."""
    for plan in plans:
        for node in plan_nodes(plan["Plan"]):
            if not bitmaps and node["Node Type"] == "Bitmap Index Scan":
                continue
            read = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
            yield read, json.dumps(node)[:300] + plan["Query Text"][:300]


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A plan node and every node below it."""
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)
