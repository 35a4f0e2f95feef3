"""The chart's `authorization` values: the policy file the api reads without OPA, and with
OPA its discovery ConfigMap's URL, the CA, and the default Rego policy as a bundle
ConfigMap, whose rendered Rego a real engine (regopy) evaluates here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from bench.opa_server import OpaServer
from metastore.policy import load_policy
from metastore.principal import Principal
from tests.deploy.helm import ALL_ON, Manifest, template
from tests.deploy.test_helm import by_kind, env_of, one

POLICY: dict[str, Any] = yaml.safe_load(ALL_ON.read_text())["authorization"]["policy"]


def api_pod(manifests: list[Manifest]) -> Manifest:
    return one(manifests, "Deployment", "-api")["spec"]["template"]  # type: ignore[no-any-return]


def batch(user: str, groups: list[str], operation: str, namespaces: list[str]) -> dict[str, Any]:
    resources = [{"namespace": {"name": n}} for n in namespaces]
    identity = {"user": user, "groups": groups}
    return {
        "input": {
            "context": {"identity": identity},
            "action": {"operation": operation, "filterResources": resources},
        }
    }


def test_without_opa_the_values_policy_is_the_file_the_api_reads(helm: str, tmp_path: Path):
    ms = template(helm, "--set-json", f"authorization.policy={json.dumps(POLICY)}")
    config_map = one(ms, "ConfigMap", "-policy")
    file = tmp_path / "policy.json"
    file.write_text(config_map["data"]["policy.json"])
    policy = load_policy(str(file))  # what the api will read
    sales = Principal("alice", "user", groups=("sales",))
    assert policy.allows(sales, "ReadNamespace", "s3a://warehouse/sales")
    assert not policy.allows(sales, "ReadNamespace", "trino://trino:8443")
    assert policy.allows(Principal("lineage-export", "service"), "ReadExport", None)

    pod = api_pod(ms)
    (api,) = pod["spec"]["containers"]
    (mount,) = [m for m in api["volumeMounts"] if m["name"] == "policy"]
    assert env_of(api)["METASTORE_POLICY_FILE"] == mount["mountPath"] + "/policy.json"
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "policy"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert "METASTORE_OPA_URL" not in env_of(api)
    # a changed policy rolls the api pods, which read it at start
    assert "checksum/policy" in pod["metadata"]["annotations"]
    (projector,) = one(ms, "Deployment", "-projector")["spec"]["template"]["spec"]["containers"]
    assert "METASTORE_POLICY_FILE" not in env_of(projector)


def test_nothing_is_decided_by_default(default_manifests: list[Manifest]) -> None:
    (api,) = api_pod(default_manifests)["spec"]["containers"]
    assert not {"METASTORE_POLICY_FILE", "METASTORE_OPA_URL"} & set(env_of(api))
    assert not by_kind(default_manifests, "ConfigMap")


def test_with_opa_the_api_asks_the_discovery_configmaps_opa(
    all_on_manifests: list[Manifest],
) -> None:
    pod = api_pod(all_on_manifests)
    (api,) = pod["spec"]["containers"]
    env = env_of(api)
    assert env["METASTORE_OPA_URL"] == {"configMapKeyRef": {"name": "opa", "key": "OPA"}}
    assert env["METASTORE_OPA_PACKAGE"] == "stackable.metastore"
    assert (env["METASTORE_OPA_TIMEOUT"], env["METASTORE_OPA_CACHE_SECONDS"]) == ("1.5", "20")
    assert "METASTORE_POLICY_FILE" not in env  # the policy is OPA's data then
    (mount,) = [m for m in api["volumeMounts"] if m["name"] == "opa-ca"]
    assert env["METASTORE_OPA_CA_FILE"] == mount["mountPath"] + "/ca.crt"
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "opa-ca"]
    annotations = volume["ephemeral"]["volumeClaimTemplate"]["metadata"]["annotations"]
    assert annotations["secrets.stackable.tech/class"] == "tls"


def test_the_bundle_configmap_is_the_default_policy_in_the_package(
    all_on_manifests: list[Manifest],
) -> None:
    bundle = one(all_on_manifests, "ConfigMap", "-opa-bundle")
    assert bundle["metadata"]["labels"]["opa.stackable.tech/bundle"] == "true"
    # The rendered Rego, evaluated by a real engine, in the package the api asks.
    users = {"bob": ["/sales"]}  # the user-info-fetcher's answer (Keycloak's group path)
    opa = OpaServer(POLICY, userinfo=users, modules=bundle["data"])
    namespaces = ["s3a://warehouse/sales", "trino://trino:8443", "hive://hive:9083"]
    path = "stackable/metastore/batch"
    assert opa.evaluate(path, batch("bob", [], "ReadNamespace", namespaces)) == {"result": [0, 2]}
    assert opa.evaluate(path, batch("eve", [], "ReadNamespace", namespaces)) == {"result": []}
    admin = batch("root", ["platform"], "WriteNamespace", namespaces)
    assert opa.evaluate(path, admin) == {"result": [0, 1, 2]}
    export = {
        "input": {
            "context": {"identity": {"user": "lineage-export", "groups": []}},
            "action": {"operation": "ReadExport"},
        }
    }
    assert opa.evaluate("stackable/metastore/allow", export) == {"result": True}
    assert opa.evaluate("metastore/allow", export) == {}  # the package was renamed


def test_without_the_user_info_fetcher_groups_are_the_identitys(helm: str) -> None:
    ms = template(
        helm,
        "--set", "authorization.opa.configMapName=opa",
        "--set-json", f"authorization.policy={json.dumps(POLICY)}",
    )  # fmt: skip
    bundle = one(ms, "ConfigMap", "-opa-bundle")
    assert "userinfo" not in bundle["data"]["groups.rego"]
    opa = OpaServer(POLICY, modules=bundle["data"])
    namespaces = ["s3a://warehouse/sales", "trino://trino:8443"]
    answer = opa.evaluate("metastore/batch", batch("bob", ["sales"], "ReadNamespace", namespaces))
    assert answer == {"result": [0]}
    (api,) = api_pod(ms)["spec"]["containers"]
    assert "METASTORE_OPA_CA_FILE" not in env_of(api)
    # A policy of one's own: no bundle, the api still asks OPA.
    own = template(
        helm,
        "--set",
        "authorization.opa.configMapName=opa",
        "--set",
        "authorization.opa.defaultPolicy=false",
    )
    assert not by_kind(own, "ConfigMap")
    (api,) = api_pod(own)["spec"]["containers"]
    assert "METASTORE_OPA_URL" in env_of(api)
