"""The catalog map from Stackable's TrinoCatalog objects (METASTORE_CATALOGS_FROM_KUBERNETES),
read over real HTTP from a stand-in Kubernetes API that answers with recorded objects."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest

from metastore.catalogs import CatalogEntry, CatalogMap, parse_catalog_map
from metastore.trino_catalogs import (
    KubernetesApi,
    discover,
    entries_from_objects,
    selects,
    with_discovered,
)
from projections.runner import catch_up
from tests.json_handler import JsonHandler
from tests.logdata import append
from tests.support import conformance_events, projector_at_start

OBJECTS = Path(__file__).parent / "data" / "kubernetes"
TOKEN = "recorded-service-account-token"
ROUTES = {
    "/apis/trino.stackable.tech/v1alpha1/namespaces/prod/trinoclusters": "trinoclusters-prod",
    "/apis/trino.stackable.tech/v1alpha1/namespaces/prod/trinocatalogs": "trinocatalogs-prod",
    "/api/v1/namespaces/prod/configmaps/hive": "configmap-prod-hive",
    "/api/v1/namespaces/prod/configmaps/hive-iceberg": "configmap-prod-hive-iceberg",
    "/api/v1/namespaces/prod/configmaps/hive-staging": "configmap-prod-hive-staging",
}
TRINO_NS = (
    "trino://trino-coordinator-default-0.trino-coordinator-default.prod.svc.cluster.local:8443"
)
EXPECTED = [
    CatalogEntry(
        "trino://adhoc-coordinator*.prod.svc.*",
        "iceberg",
        "hive://hive-iceberg.prod.svc.cluster.local:9083",
    ),
    CatalogEntry(
        "trino://trino-coordinator*.prod.svc.*",
        "iceberg",
        "hive://hive-iceberg.prod.svc.cluster.local:9083",
    ),
    CatalogEntry(
        "trino://trino-coordinator*.prod.svc.*", "lakehouse", "hive://hive-metastore:9083"
    ),
]


def recorded(name: str) -> Any:
    return json.loads((OBJECTS / f"{name}.json").read_text())


class FakeApi(ThreadingHTTPServer):
    requests: list[tuple[str, str | None]]


@pytest.fixture
def kubernetes_api() -> Iterator[FakeApi]:
    """A stand-in API server: the recorded objects at their paths, 404 for anything else,
    401 without the ServiceAccount's token."""

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            server.requests.append((self.path, self.headers.get("Authorization")))
            name = ROUTES.get(self.path)
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                code, body = 401, {"kind": "Status", "code": 401}
            elif name is None:
                code, body = 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
            else:
                code, body = 200, recorded(name)
            self.send_json(body, code)

    server = FakeApi(("127.0.0.1", 0), Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_the_entries_of_recorded_objects() -> None:
    config_maps = {
        ("prod", name): recorded(f"configmap-prod-{name}")
        for name in ("hive", "hive-iceberg", "hive-staging")
    }
    entries = entries_from_objects(
        recorded("trinoclusters-prod")["items"],
        recorded("trinocatalogs-prod")["items"],
        config_maps,
    )
    # tpch has no metastore, staging is not selected, delta's ConfigMap is not there
    assert entries == EXPECTED
    # the coordinator's pod and Service names, as Trino's listener names its namespace
    catalogs = CatalogMap(tuple(entries))
    match = catalogs.match(TRINO_NS, "lakehouse.sales.orders_daily")
    assert match is not None and match.entry.metastore == "hive://hive-metastore:9083"
    service = "trino://trino-coordinator.prod.svc.cluster.local:8443"
    assert catalogs.match(service, "iceberg.sales.events") is not None
    assert catalogs.match(TRINO_NS.replace(".prod.", ".dev."), "lakehouse.sales.x") is None


def test_label_selectors_are_read_as_kubernetes_reads_them() -> None:
    labels = {"trino": "trino", "team": "analytics"}
    assert selects(None, labels) and selects({}, labels)
    assert selects({"matchLabels": {"trino": "trino"}}, labels)
    assert not selects({"matchLabels": {"trino": "other"}}, labels)
    for operator, values, expected in [
        ("In", ["analytics", "x"], True),
        ("In", ["x"], False),
        ("NotIn", ["analytics"], False),
        ("NotIn", ["x"], True),
        ("Exists", [], True),
        ("DoesNotExist", [], False),
    ]:
        expression = {"key": "team", "operator": operator, "values": values}
        assert selects({"matchExpressions": [expression]}, labels) is expected, operator


def test_discovery_reads_the_objects_over_http_with_the_service_accounts_token(
    kubernetes_api: FakeApi,
) -> None:
    api = KubernetesApi(f"http://127.0.0.1:{kubernetes_api.server_port}", TOKEN)
    assert discover(api, ["prod"]) == EXPECTED
    paths = [path for path, _ in kubernetes_api.requests]
    assert "/api/v1/namespaces/prod/configmaps/hive-gone" in paths  # (404: joins nothing)
    assert {auth for _, auth in kubernetes_api.requests} == {f"Bearer {TOKEN}"}
    wrong = KubernetesApi(f"http://127.0.0.1:{kubernetes_api.server_port}", "other")
    with pytest.raises(OSError):
        discover(wrong, ["prod"])


def test_the_files_entries_come_first_and_win() -> None:
    given = parse_catalog_map(
        "catalogs:\n  - engine: 'trino://trino-coordinator*.prod.svc.*'\n"
        "    catalog: lakehouse\n    metastore: 'hive://other:9083'\n",
        "catalogs.yaml",
    )
    combined = with_discovered(given, EXPECTED)
    assert [e.metastore for e in combined.entries] == [
        "hive://other:9083",
        "hive://hive-iceberg.prod.svc.cluster.local:9083",
        "hive://hive-iceberg.prod.svc.cluster.local:9083",
    ]
    assert combined.fingerprint != CatalogMap(tuple(EXPECTED)).fingerprint


def test_the_seed_joins_with_the_map_the_trino_catalogs_give(
    conn: psycopg.Connection[Any], kubernetes_api: FakeApi
) -> None:
    api = KubernetesApi(f"http://127.0.0.1:{kubernetes_api.server_port}", TOKEN)
    catalogs = with_discovered(CatalogMap(), discover(api, ["prod"]))
    append(conn, conformance_events("scenarios/seed_spark_trino"))
    catch_up(conn, catalogs=catalogs)
    ids = {
        r[0]
        for r in conn.execute(
            "SELECT dataset_id FROM readmodel.dataset_names WHERE (namespace, name) IN "
            "(('s3a://warehouse', 'sales.db/orders_daily'), "
            "('hive://hive-metastore:9083', 'sales.orders_daily'), (%s, %s))",
            (TRINO_NS, "lakehouse.sales.orders_daily"),
        )
    }
    assert len(ids) == 1


def test_outside_a_pod_the_projector_stops_with_one_line(tmp_path: Path) -> None:
    done = projector_at_start(
        {"METASTORE_CATALOGS_FROM_KUBERNETES": "prod"}, unset=("KUBERNETES_SERVICE_",)
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "metastore: METASTORE_CATALOGS_FROM_KUBERNETES='prod': cannot read the TrinoCatalogs: "
        "not in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set)"
    ]
