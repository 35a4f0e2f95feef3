"""Issue 44's scenario: three teams on one platform, through the real processes.

The brief's table under three names (Spark's `s3a://warehouse` + `sales.db/orders_daily`,
its Hive symlink, Trino's `lakehouse.sales.orders_daily` joined by the catalog map),
written by the sales team's Spark job and read by the finance team's Trino query, plus a
marketing team's Airflow job. Each user sees only its team's side: counts, search,
lineage, impact and the export agree with each other; an admin sees everything; the Spark
token may not write Trino's namespace; the JDBC password reaches neither log nor export.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench.opa_server import OpaServer, opa_server
from metastore.redact import MARKER
from tests.conftest import Server
from tests.oidc_issuer import Issuer, running_issuer
from tests.support import BRIEF_CATALOGS, TRINO, running, schema_facet, wait_until_folded

SPARK_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/spark"
TRINO_PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/trino"
AIRFLOW_PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.0"
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
PASSWORD = "Tr0ub4dor&3"

SPARK_JOB = ("spark-sales", "orders_etl.execute_replace_table_as_select_command")
TRINO_JOB = ("trino-finance", "20260902_101500_00042_ab3kd")
AIRFLOW_JOB = ("airflow-marketing", "campaigns.load_audience")
RAW = ("s3a://warehouse", "raw.db/orders")
DAILY = ("s3a://warehouse", "sales.db/orders_daily")
HIVE_DAILY = ("hive://hive-metastore:9083", "sales.orders_daily")
TRINO_DAILY = (TRINO, "lakehouse.sales.orders_daily")
# finance writes a catalog of its own, not mapped to the shared Hive metastore
REVENUE = (TRINO, "finance_lake.reports.revenue_by_region")
CONTACTS = ("postgres://crm:5432", "crm.public.contacts")
AUDIENCE = ("s3a://marketing", "audience.db/daily")

POLICY = {
    "admins": ["group:platform"],
    "read": [
        {"subjects": ["group:sales"], "namespaces": ["spark-sales", "s3a://warehouse", "hive://*"]},
        {"subjects": ["group:finance"], "namespaces": ["trino-finance", "trino://*"]},
        {
            "subjects": ["group:marketing"],
            "namespaces": ["airflow-marketing", "postgres://crm*", "s3a://marketing"],
        },
    ],
    "sensitive": [
        {"subjects": ["group:sales"], "namespaces": ["spark-sales"]},
    ],
    "write": [
        {"subjects": ["spark-sales"], "namespaces": ["spark-sales", "s3a://warehouse"]},
        {"subjects": ["trino"], "namespaces": ["trino-finance", "trino://*"]},
        {"subjects": ["airflow-marketing"], "namespaces": ["airflow-marketing", "s3a://marketing"]},
    ],
    "export": ["group:sales", "group:finance", "group:marketing", "group:platform"],
}
# Each team's user and the way it signs in: sales and finance with their own JWT of the
# platform's OIDC issuer, marketing and the admin through Cockpit's token acting for them.
USERS = {
    "sales": ("sally", "jwt", ("sales",)),
    "finance": ("fred", "jwt", ("finance",)),
    "marketing": ("mia", "cockpit", ("marketing",)),
    "admin": ("ada", "cockpit", ("platform",)),
}
WRITERS = ("spark-sales", "trino", "airflow-marketing")
COCKPIT_TOKEN = "cockpit-token-0123456789abcdef"


def _ds(name: tuple[str, str], **facets: Any) -> dict[str, Any]:
    return {"namespace": name[0], "name": name[1], "facets": facets}


def _event(kind: str, when: str, producer: str, job: tuple[str, str], run: str,
           inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
           run_facets: dict[str, Any] | None = None,
           job_facets: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "eventType": kind,
        "eventTime": when,
        "producer": producer,
        "schemaURL": RUN_EVENT,
        "job": {"namespace": job[0], "name": job[1], "facets": job_facets or {}},
        "run": {"runId": run, "facets": run_facets or {}},
        "inputs": inputs,
        "outputs": outputs,
    }


def _facet(producer: str, schema: str, **body: Any) -> dict[str, Any]:
    return {
        "_producer": producer,
        "_schemaURL": f"https://openlineage.io/spec/facets/{schema}",
        **body,
    }


SPARK_RUN = "0191a000-0000-7000-8000-000000000001"
TRINO_RUN = "0191a000-0000-7000-8000-000000000002"
AIRFLOW_RUN = "0191a000-0000-7000-8000-000000000003"


def spark_events() -> list[dict[str, Any]]:
    symlink = _facet(
        SPARK_PRODUCER,
        "1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
        identifiers=[{"namespace": HIVE_DAILY[0], "name": HIVE_DAILY[1], "type": "TABLE"}],
    )
    daily = _ds(
        DAILY, symlinks=symlink, schema=schema_facet(SPARK_PRODUCER, [("order_id", "bigint")])
    )
    properties = _facet(
        SPARK_PRODUCER,
        "1-0-0/SparkPropertiesFacet.json",
        properties={
            "spark.app.name": "orders_etl",
            "spark.sql.catalog.pg.url": f"jdbc:postgresql://db:5432/sales?user=etl&password={PASSWORD}",
        },
    )
    return [
        _event("START", "2026-09-02T10:00:00Z", SPARK_PRODUCER, SPARK_JOB, SPARK_RUN,
               [_ds(RAW)], [daily], {"spark_properties": properties}),
        _event("COMPLETE", "2026-09-02T10:05:00Z", SPARK_PRODUCER, SPARK_JOB, SPARK_RUN,
               [_ds(RAW)], [daily], {"spark_properties": properties}),
    ]  # fmt: skip


def trino_events() -> list[dict[str, Any]]:
    sql = _facet(
        TRINO_PRODUCER,
        "1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet",
        query="INSERT INTO finance_lake.reports.revenue_by_region SELECT region, sum(revenue) "
        "FROM lakehouse.sales.orders_daily GROUP BY region",
    )
    return [
        _event(kind, when, TRINO_PRODUCER, TRINO_JOB, TRINO_RUN, [_ds(TRINO_DAILY)],
               [_ds(REVENUE)], job_facets={"sql": sql})
        for kind, when in (("START", "2026-09-02T11:00:00Z"), ("COMPLETE", "2026-09-02T11:01:00Z"))
    ]  # fmt: skip


def airflow_events() -> list[dict[str, Any]]:
    return [
        _event(kind, when, AIRFLOW_PRODUCER, AIRFLOW_JOB, AIRFLOW_RUN, [_ds(CONTACTS)],
               [_ds(AUDIENCE)])
        for kind, when in (("START", "2026-09-02T12:00:00Z"), ("COMPLETE", "2026-09-02T12:03:00Z"))
    ]  # fmt: skip


class Platform:
    def __init__(
        self, url: str, client: httpx.Client, tokens: dict[str, str], issuer: Issuer
    ) -> None:
        self.url = url
        self.client = client
        self.tokens = tokens
        self.issuer = issuer

    def headers(self, who: str) -> dict[str, str]:
        if who not in USERS:
            return {"Authorization": f"Bearer {self.tokens[who]}"}
        user, how, groups = USERS[who]
        if how == "jwt":
            return {"Authorization": f"Bearer {self.issuer.token(user, list(groups))}"}
        return {
            "Authorization": f"Bearer {COCKPIT_TOKEN}",
            "X-Metastore-User": user,
            "X-Metastore-Groups": ",".join(groups),
        }

    def get(self, who: str, path: str, **params: Any) -> Any:
        answer = self.client.get(path, params=params, headers=self.headers(who))
        assert answer.status_code == 200, (who, path, answer.text)
        return answer.json()

    def status(self, who: str, path: str, **params: Any) -> int:
        return self.client.get(path, params=params, headers=self.headers(who)).status_code

    def log_count(self) -> int:
        with psycopg.connect(self.url) as conn:
            (count,) = conn.execute("SELECT count(*) FROM event_log").fetchone() or (0,)
        return int(count)


@pytest.fixture(scope="module", params=["opa", "policy-file"])
def platform(
    request: pytest.FixtureRequest,
    pg_server: Server,
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Platform]:
    """The platform deciding by OPA over the chart's Rego (groups from the users' JWTs and
    Cockpit's header), or by the chart values' policy file."""
    with contextlib.ExitStack() as stack:
        opa = stack.enter_context(opa_server(POLICY)) if request.param == "opa" else None
        yield from _platform(stack, pg_server, template_db, tmp_path_factory, opa)


def _platform(
    stack: contextlib.ExitStack,
    pg_server: Server,
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
    opa: OpaServer | None,
) -> Iterator[Platform]:
    work: Path = tmp_path_factory.mktemp("authz-scenario")
    tokens = {who: f"token-of-{who}-0123456789" for who in WRITERS}
    named = [{"name": who, "scopes": ["ingest"], "token": tokens[who]} for who in WRITERS]
    named.append(
        {
            "name": "cockpit",
            "scopes": ["read", "export"],
            "token": COCKPIT_TOKEN,
            "act_for_users": True,
        }
    )
    (work / "tokens.json").write_text(json.dumps(named))
    (work / "policy.json").write_text(json.dumps(POLICY))
    (work / "catalogs.yaml").write_text(BRIEF_CATALOGS)
    issuer = stack.enter_context(running_issuer(work / "issuer"))
    env = {
        **issuer.env(),
        "METASTORE_OIDC_SCOPES": "read,export",
        "METASTORE_AUTH": "enabled",
        "METASTORE_TOKENS_FILE": str(work / "tokens.json"),
        **(
            {"METASTORE_OPA_URL": opa.url}
            if opa is not None
            else {"METASTORE_POLICY_FILE": str(work / "policy.json")}
        ),
        "METASTORE_CATALOGS_FILE": str(work / "catalogs.yaml"),
    }
    with (
        pg_server.database("authz", template_db) as url,
        running("api", url, work, env=env) as api,
        running("projector", url, work, env=env),
        httpx.Client(base_url=api.base_url, timeout=30) as client,
    ):
        platform = Platform(url, client, tokens, issuer)
        for writer, events in (("spark-sales", spark_events()), ("trino", trino_events()),
                               ("airflow-marketing", airflow_events())):  # fmt: skip
            for event in events:
                answer = client.post(
                    "/api/v1/lineage", json=event, headers=platform.headers(writer)
                )
                assert answer.status_code in (200, 201), answer.text
        wait_until_folded(client, headers=platform.headers("admin"))
        yield platform


# What each user must see: namespaces, datasets (by the names shown), jobs.
SEES = {
    "sales": {
        "namespaces": {"spark-sales", "s3a://warehouse", "hive://hive-metastore:9083"},
        "datasets": {frozenset({DAILY, HIVE_DAILY}), frozenset({RAW})},
        "jobs": {SPARK_JOB},
    },
    "finance": {
        "namespaces": {"trino-finance", TRINO},
        "datasets": {frozenset({TRINO_DAILY}), frozenset({REVENUE})},
        "jobs": {TRINO_JOB},
    },
    "marketing": {
        "namespaces": {"airflow-marketing", "postgres://crm:5432", "s3a://marketing"},
        "datasets": {frozenset({CONTACTS}), frozenset({AUDIENCE})},
        "jobs": {AIRFLOW_JOB},
    },
}
SEES["admin"] = {
    "namespaces": set().union(*(s["namespaces"] for s in SEES.values())),
    "datasets": {frozenset({DAILY, HIVE_DAILY, TRINO_DAILY}), frozenset({RAW}),
                 frozenset({REVENUE}), frozenset({CONTACTS}), frozenset({AUDIENCE})},
    "jobs": {SPARK_JOB, TRINO_JOB, AIRFLOW_JOB},
}  # fmt: skip


def _names(platform: Platform, who: str, dataset_id: str) -> frozenset[tuple[str, str]]:
    page = platform.get(who, f"/api/v1/datasets/{dataset_id}")
    return frozenset((n["namespace"], n["name"]) for n in page["names"])


def _all(platform: Platform, who: str, path: str, **params: Any) -> tuple[list[Any], int]:
    """Every item of a list, paged, and the total its first page gave."""
    items: list[Any] = []
    page = platform.get(who, path, limit=2, **params)
    total = page["total"]
    while True:
        items += page["items"]
        if not page["next_cursor"]:
            return items, total
        page = platform.get(who, path, limit=2, cursor=page["next_cursor"], **params)


def _daily_id(platform: Platform) -> str:
    (item,) = platform.get("admin", "/api/v1/datasets", namespace=DAILY[0], name=DAILY[1])["items"]
    return str(item["id"])


@pytest.mark.parametrize("who", sorted(SEES))
def test_lists_counts_and_search_show_a_user_its_teams_side(platform: Platform, who: str) -> None:
    sees = SEES[who]
    namespaces, total = _all(platform, who, "/api/v1/namespaces")
    assert {n["name"] for n in namespaces} == sees["namespaces"] and total == len(namespaces)
    datasets, total = _all(platform, who, "/api/v1/datasets")
    assert total == len(datasets)
    assert {_names(platform, who, d["id"]) for d in datasets} == sees["datasets"]
    jobs, total = _all(platform, who, "/api/v1/jobs")
    assert {(j["namespace"], j["name"]) for j in jobs} == sees["jobs"] and total == len(jobs)
    # each namespace's counts are what a list filtered by it shows
    for namespace in namespaces:
        in_it, total = _all(platform, who, "/api/v1/datasets", namespace=namespace["name"])
        assert namespace["dataset_count"] == total == len(in_it), namespace
        jobs_in_it, total = _all(platform, who, "/api/v1/jobs", namespace=namespace["name"])
        assert namespace["job_count"] == total == len(jobs_in_it), namespace
    # search finds exactly what the lists show
    hits, total = _all(platform, who, "/api/v1/search", q="o")
    assert total == len(hits)
    assert {h["id"] for h in hits if h["type"] == "dataset"} <= {d["id"] for d in datasets}
    assert {(h["namespace"], h["name"]) for h in hits if h["type"] == "job"} <= sees["jobs"]
    visible_names = set().union(*sees["datasets"])
    for hit in hits:
        if hit["type"] == "dataset":
            assert (hit["namespace"], hit["name"]) in visible_names, hit
            matched = hit["matched_name"]
            assert (matched["namespace"], matched["name"]) in visible_names, hit


def _graph_names(graph: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(n["type"], n["namespace"], n["name"]) for n in graph["nodes"]}


# The shared table's graph, as each team sees it (names as shown).
GRAPH = {
    # the shared table under its display name: its Hive name (a symlink of type TABLE)
    "sales": {("dataset", *HIVE_DAILY), ("job", *SPARK_JOB), ("dataset", *RAW)},
    "finance": {("dataset", *TRINO_DAILY), ("job", *TRINO_JOB), ("dataset", *REVENUE)},
}
DOWNSTREAM = {"sales": set(), "finance": {("job", *TRINO_JOB), ("dataset", *REVENUE)}}


@pytest.mark.parametrize("who", ["sales", "finance"])
def test_a_graph_stops_at_the_team_border_now_and_as_of_now(platform: Platform, who: str) -> None:
    node = f"dataset:{_daily_id(platform)}"
    now = platform.get(who, "/api/v1/lineage", node=node, depth=5)
    assert _graph_names(now) == GRAPH[who]
    as_of = platform.get(who, "/api/v1/lineage", node=node, depth=5, as_of="2030-01-01T00:00:00Z")
    assert _graph_names(as_of) == GRAPH[who]
    shown = {n["id"] for n in now["nodes"]}
    for edge in now["edges"]:
        assert edge["from"]["id"] in shown and edge["to"]["id"] in shown, edge
    impact = platform.get(who, "/api/v1/impact", node=node, depth=5)
    start = {("dataset", *HIVE_DAILY), ("dataset", *TRINO_DAILY)}
    assert _graph_names(impact) - start == DOWNSTREAM[who]


def test_an_admin_sees_the_whole_graph_and_another_team_gets_a_404(platform: Platform) -> None:
    node = f"dataset:{_daily_id(platform)}"
    whole = platform.get("admin", "/api/v1/lineage", node=node, depth=5)
    assert {(t, ns, n) for t, ns, n in _graph_names(whole) if t == "job"} == {
        ("job", *SPARK_JOB),
        ("job", *TRINO_JOB),
    }
    assert platform.status("marketing", "/api/v1/lineage", node=node) == 404
    assert platform.status("marketing", f"/api/v1/datasets/{_daily_id(platform)}") == 404
    unknown = "dataset:00000000-0000-0000-0000-000000000000"
    assert platform.status("marketing", "/api/v1/lineage", node=unknown) == 404


def test_query_text_is_shown_only_where_the_policy_allows(platform: Platform) -> None:
    (job,) = platform.get("admin", "/api/v1/jobs", namespace=TRINO_JOB[0])["items"]
    assert "sql" in platform.get("admin", f"/api/v1/jobs/{job['id']}")["facets"]
    assert "sql" not in platform.get("finance", f"/api/v1/jobs/{job['id']}")["facets"]
    run = platform.get("sales", f"/api/v1/runs/{SPARK_RUN}")
    assert "spark_properties" in run["facets"]  # sales may see its own Spark properties
    assert platform.status("finance", f"/api/v1/runs/{SPARK_RUN}") == 404


def _export(platform: Platform, who: str) -> list[dict[str, Any]]:
    answer = platform.client.get(
        "/export/openlineage/events", params={"limit": 1000}, headers=platform.headers(who)
    )
    assert answer.status_code == 200, answer.text
    assert PASSWORD not in answer.text
    return answer.json()["events"]  # type: ignore[no-any-return]


def test_the_export_feed_agrees_with_the_api_and_holds_no_password(platform: Platform) -> None:
    jobs = {who: {tuple(e["job"].values())[:2] for e in _export(platform, who)} for who in SEES}
    for who, sees in SEES.items():
        assert {(j[0], j[1]) for j in jobs[who]} == sees["jobs"], who
    finance = _export(platform, "finance")
    assert all("sql" not in e["job"].get("facets", {}) for e in finance)
    with psycopg.connect(platform.url) as conn:
        stored = [text for (text,) in conn.execute("SELECT event::text FROM event_log")]
    assert stored and not any(PASSWORD in text for text in stored)
    assert any(MARKER in text for text in stored)


def test_a_token_may_not_write_another_teams_namespace(platform: Platform) -> None:
    before = platform.log_count()
    forged = trino_events()[0] | {"run": {"runId": "0191a000-0000-7000-8000-0000000000ff"}}
    answer = platform.client.post(
        "/api/v1/lineage", json=forged, headers=platform.headers("spark-sales")
    )
    assert answer.status_code == 403, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert "trino-finance" in answer.json()["detail"]
    batch = [spark_events()[0], forged]
    answer = platform.client.post(
        "/api/v1/lineage/batch", json=batch, headers=platform.headers("spark-sales")
    )
    assert answer.status_code == 403, answer.text
    assert platform.log_count() == before  # nothing appended, not even the allowed event
