"""Catalog map entries derived from Stackable's TrinoCatalog objects (off unless configured).

On Kubernetes the platform already knows which Trino catalog is which Hive metastore: a
`TrinoCluster` picks its catalogs with `spec.clusterConfig.catalogLabelSelector`, each
`TrinoCatalog` (its name is the catalog's name in Trino) names the discovery ConfigMap of
the metastore its connector uses (`spec.connector.{hive,iceberg,deltaLake}.metastore.
configMap`), and that ConfigMap's `HIVE` key holds the metastore's `thrift://` URI. With
METASTORE_CATALOGS_FROM_KUBERNETES naming namespaces, the projector reads these objects at
start (read-only: get and list, through its ServiceAccount) and adds an entry per cluster
and catalog to the catalog map, after the file's entries (which win for the same engine
and catalog). The engine namespace is `trino://<cluster>-coordinator*.<namespace>.svc.*`:
the coordinator's pods and Services alike, as the Trino listener's `trino.uri` names them.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from metastore.catalogs import CatalogEntry, CatalogFileError, CatalogMap, metastore_namespace
from metastore.exit import one_line

VARIABLE = "METASTORE_CATALOGS_FROM_KUBERNETES"
GROUP = "/apis/trino.stackable.tech/v1alpha1"
# The connectors whose catalogs live in a Hive metastore (by its discovery ConfigMap).
METASTORE_CONNECTORS = ("hive", "iceberg", "deltaLake")
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT_S = 10.0

Obj = Mapping[str, Any]


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether a Kubernetes LabelSelector (matchLabels, matchExpressions) selects `labels`.

    An empty or missing selector selects everything, as Kubernetes reads it.
    """
    if not isinstance(selector, Mapping):
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        present = key in labels
        if (
            (operator == "In" and (not present or labels[key] not in values))
            or (operator == "NotIn" and present and labels[key] in values)
            or (operator == "Exists" and not present)
            or (operator == "DoesNotExist" and present)
        ):
            return False
    return True


def entries_from_objects(
    clusters: Iterable[Obj], catalogs: Iterable[Obj], config_maps: Mapping[tuple[str, str], Obj]
) -> list[CatalogEntry]:
    """The entries the objects give: for each TrinoCluster, each TrinoCatalog of its
    namespace it selects whose connector names a metastore discovery ConfigMap with a
    `HIVE` URI. `config_maps` by (namespace, name). Sorted, so the map (and its
    fingerprint) does not depend on the API's order."""
    catalogs = list(catalogs)
    entries = set()
    for cluster in clusters:
        namespace = _get(cluster, "metadata", "namespace")
        name = _get(cluster, "metadata", "name")
        if not namespace or not name:
            continue
        selector = _get(cluster, "spec", "clusterConfig", "catalogLabelSelector")
        engine = f"trino://{name}-coordinator*.{namespace}.svc.*"
        for catalog in catalogs:
            if _get(catalog, "metadata", "namespace") != namespace:
                continue
            labels = _get(catalog, "metadata", "labels") or {}
            if not selects(selector, labels):
                continue
            metastore = _metastore_of(catalog, namespace, config_maps)
            catalog_name = _get(catalog, "metadata", "name")
            if metastore is not None and catalog_name and "." not in catalog_name:
                entries.add((engine, catalog_name, metastore))
    return [CatalogEntry(e, c, m) for e, c, m in sorted(entries)]


def _metastore_of(
    catalog: Obj, namespace: str, config_maps: Mapping[tuple[str, str], Obj]
) -> str | None:
    connector = _get(catalog, "spec", "connector") or {}
    for kind in METASTORE_CONNECTORS:
        config_map = _get(connector, kind, "metastore", "configMap")
        if config_map:
            uri = _get(config_maps.get((namespace, config_map)), "data", "HIVE")
            if not isinstance(uri, str):
                return None
            return metastore_namespace(uri.split(",")[0])  # (several: the first)
    return None


def metastore_config_maps(catalogs: Iterable[Obj]) -> set[tuple[str, str]]:
    """The (namespace, name) of the discovery ConfigMaps the catalogs name."""
    wanted = set()
    for catalog in catalogs:
        namespace = _get(catalog, "metadata", "namespace")
        for kind in METASTORE_CONNECTORS:
            name = _get(catalog, "spec", "connector", kind, "metastore", "configMap")
            if namespace and name:
                wanted.add((namespace, name))
    return wanted


class KubernetesApi:
    """GETs on the Kubernetes API with a bearer token (the pod's ServiceAccount)."""

    def __init__(self, base_url: str, token: str, ca_file: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None

    @classmethod
    def in_cluster(cls, env: Mapping[str, str]) -> KubernetesApi:
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise OSError("not in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set)")
        token = (SERVICE_ACCOUNT / "token").read_text().strip()
        host = f"[{host}]" if ":" in host else host
        return cls(f"https://{host}:{port}", token, str(SERVICE_ACCOUNT / "ca.crt"))

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            self.base_url + path,
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=self.context) as answer:
            return json.load(answer)

    def items(self, path: str) -> list[Obj]:
        found = self.get(path).get("items")
        return found if isinstance(found, list) else []


def discover(api: KubernetesApi, namespaces: Iterable[str]) -> list[CatalogEntry]:
    """Reads the TrinoClusters, TrinoCatalogs and metastore ConfigMaps of `namespaces`."""
    clusters: list[Obj] = []
    catalogs: list[Obj] = []
    for namespace in namespaces:
        quoted = urllib.parse.quote(namespace, safe="")
        clusters += api.items(f"{GROUP}/namespaces/{quoted}/trinoclusters")
        catalogs += api.items(f"{GROUP}/namespaces/{quoted}/trinocatalogs")
    config_maps: dict[tuple[str, str], Obj] = {}
    for namespace, name in sorted(metastore_config_maps(catalogs)):
        path = "/api/v1/namespaces/{}/configmaps/{}".format(
            *(urllib.parse.quote(p, safe="") for p in (namespace, name))
        )
        try:
            config_maps[(namespace, name)] = api.get(path)
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # (a catalog naming a ConfigMap not there yet joins nothing)
                raise
    return entries_from_objects(clusters, catalogs, config_maps)


def with_discovered(catalogs: CatalogMap, discovered: Iterable[CatalogEntry]) -> CatalogMap:
    """`catalogs` (the file's entries) followed by the discovered ones it does not have."""
    given = {(e.engine, e.catalog) for e in catalogs.entries}
    extra = tuple(e for e in discovered if (e.engine, e.catalog) not in given)
    source = f"{catalogs.source or 'no file'} and TrinoCatalogs"
    return CatalogMap(catalogs.entries + extra, source)


def catalogs_with_kubernetes(
    catalogs: CatalogMap, namespaces: list[str], env: Mapping[str, str]
) -> CatalogMap:
    """The file's map plus what the namespaces' TrinoCatalogs give; CatalogFileError (one
    line) when the Kubernetes API cannot be read."""
    try:
        api = KubernetesApi.in_cluster(env)
        return with_discovered(catalogs, discover(api, namespaces))
    except (OSError, ValueError) as exc:
        raise CatalogFileError(
            f"{VARIABLE}={','.join(namespaces)!r}: cannot read the TrinoCatalogs: {one_line(exc)}"
        ) from None
