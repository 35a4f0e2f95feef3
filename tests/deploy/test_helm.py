"""The Helm chart in deploy/helm/metastore: lint, render, validate, and check what matters.

helm: tests/deploy/helm.py (fetched when missing). Without helm these tests skip locally but
fail when CI is set. Rendered manifests are validated offline against the Kubernetes
schemas bundled with the kubernetes-validate package.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.helm import (
    ALL_ON,
    CHART,
    NAMESPACE,
    RELEASE,
    Manifest,
    install_notes,
    run_helm,
    template,
)

K8S_VERSIONS = ["1.30", "1.33"]
CHART_META = yaml.safe_load((CHART / "Chart.yaml").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())
# Kinds kubernetes-validate has no schema for (CRDs); their structure is checked by hand.
CRD_GROUPS = ("monitoring.coreos.com/", "listeners.stackable.tech/")


@pytest.fixture(scope="session", params=["default", "all-on"])
def manifests(request: pytest.FixtureRequest) -> list[Manifest]:
    name = "default_manifests" if request.param == "default" else "all_on_manifests"
    return request.getfixturevalue(name)


def by_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def one(manifests: list[Manifest], kind: str, name_suffix: str = "") -> Manifest:
    found = [m for m in by_kind(manifests, kind) if m["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind} *{name_suffix}, got {len(found)}"
    return found[0]


def pod_specs(manifests: list[Manifest]) -> Iterator[tuple[str, Manifest]]:
    for m in manifests:
        if m["kind"] in ("Deployment", "Job"):
            yield m["metadata"]["name"], m["spec"]["template"]["spec"]


def env_of(container: Manifest) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# --------------------------------------------------------------------------------------
# lint and schema validation


@pytest.mark.parametrize("values", [None, ALL_ON], ids=["default", "all-on"])
def test_helm_lint_strict(helm: str, values: Path | None) -> None:
    args = ["lint", "--strict", str(CHART)]
    if values is not None:
        args += ["-f", str(values)]
    result = run_helm(helm, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@pytest.mark.parametrize("k8s_version", K8S_VERSIONS)
def test_manifests_match_kubernetes_schemas(manifests: list[Manifest], k8s_version: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    validated = 0
    for m in manifests:
        if m["apiVersion"].startswith(CRD_GROUPS):
            continue
        try:
            kubernetes_validate.validate(m, k8s_version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = "/".join(str(p) for p in e.path)
            pytest.fail(f"{m['kind']}/{m['metadata']['name']}: {path}: {e.message}")
        validated += 1
    assert validated >= 7


def test_service_monitor_structure(all_on_manifests: list[Manifest]) -> None:
    sm = one(all_on_manifests, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["namespace"] == "monitoring"
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert set(sm["spec"]) == {"namespaceSelector", "selector", "endpoints"}
    endpoints = {e["port"]: e for e in sm["spec"]["endpoints"]}
    assert set(endpoints) == {"https", "metrics"}  # all-on serves TLS
    for e in endpoints.values():
        assert set(e) <= {"port", "path", "interval", "scrapeTimeout", "scheme", "tlsConfig"}
        assert e["path"] == "/metrics" and e["interval"] == "15s" and e["scrapeTimeout"] == "5s"
        assert e["scheme"] == "https"
        assert e["tlsConfig"] == {"ca": {"secret": {"name": "metastore-ca", "key": "ca.crt"}}}
    # The selector matches both Services, and each Service has the port of one endpoint.
    selector = sm["spec"]["selector"]
    services = by_kind(all_on_manifests, "Service")
    assert len(services) == 2
    for svc in services:
        labels = svc["metadata"]["labels"]
        assert selector["matchLabels"].items() <= labels.items()
        (expr,) = selector["matchExpressions"]
        assert expr["operator"] == "In" and labels[expr["key"]] in expr["values"]
        assert {p["name"] for p in svc["spec"]["ports"]} & set(endpoints)


def test_service_monitor_is_off_by_default(default_manifests: list[Manifest]) -> None:
    assert DEFAULTS["serviceMonitor"]["enabled"] is False
    assert not by_kind(default_manifests, "ServiceMonitor")


def test_resources_rendered(default_manifests: list[Manifest], all_on_manifests: list[Manifest]):
    def kinds(ms: list[Manifest]) -> list[str]:
        return sorted(m["kind"] for m in ms)

    assert kinds(default_manifests) == sorted(
        [
            "Deployment",
            "Deployment",
            "Job",
            "PodDisruptionBudget",
            "Secret",
            "Service",
            "Service",
            "ServiceAccount",
        ]
    )
    assert kinds(all_on_manifests) == sorted(
        [
            "ConfigMap",
            "ConfigMap",
            "ConfigMap",  # the named tokens' file
            "ConfigMap",  # the authorization policy
            "ConfigMap",  # the cadence overrides
            "Deployment",
            "Deployment",
            "HorizontalPodAutoscaler",
            "Ingress",
            "Job",
            "Listener",
            "PodDisruptionBudget",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "Secret",
            "Secret",
            "Secret",
            "Service",
            "Service",
            "ServiceAccount",
            "ServiceMonitor",
            "PrometheusRule",
        ]
    )


# --------------------------------------------------------------------------------------
# security


def test_pods_are_locked_down(manifests: list[Manifest]) -> None:
    specs = dict(pod_specs(manifests))
    assert len(specs) == 3
    for name, spec in specs.items():
        assert spec["automountServiceAccountToken"] is False, name
        assert spec["enableServiceLinks"] is False, name
        psc = spec["securityContext"]
        assert psc["runAsNonRoot"] is True, name
        assert psc["runAsUser"] == 1000 and psc["runAsGroup"] == 1000, name
        assert psc["fsGroup"] == 1000, name
        assert psc["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert "hostNetwork" not in spec and "hostPID" not in spec, name
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes["tmp"], name
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["runAsNonRoot"] is True, name
            assert sc["runAsUser"] == 1000, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["privileged"] is False, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
            assert "add" not in sc["capabilities"], name
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            assert mounts["/tmp"]["name"] == "tmp", name
            # Everything else mounted is read-only.
            for path, m in mounts.items():
                if path != "/tmp":
                    assert m.get("readOnly") is True, (name, path)


def test_service_account_does_not_mount_a_token(default_manifests: list[Manifest]) -> None:
    sa = one(default_manifests, "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    for _, spec in pod_specs(default_manifests):
        if "serviceAccountName" in spec:
            assert spec["serviceAccountName"] == sa["metadata"]["name"]


def test_platform_assigned_uid(helm: str) -> None:
    ms = template(
        helm,
        "--set",
        "securityContext.runAsUser=null",
        "--set",
        "securityContext.runAsGroup=null",
        "--set",
        "securityContext.fsGroup=null",
    )
    for name, spec in pod_specs(ms):
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(spec["securityContext"]), name
        sc = spec["containers"][0]["securityContext"]
        assert "runAsUser" not in sc and sc["readOnlyRootFilesystem"] is True, name


# --------------------------------------------------------------------------------------
# workloads


def test_commands(manifests: list[Manifest]) -> None:
    api = one(manifests, "Deployment", "-api")["spec"]["template"]["spec"]["containers"]
    projector = one(manifests, "Deployment", "-projector")["spec"]["template"]["spec"]
    job = one(manifests, "Job")["spec"]["template"]["spec"]
    assert [c["command"] for c in api] == [["metastore", "api"]]
    assert [c["command"] for c in projector["containers"]] == [["metastore", "projector"]]
    assert [c["command"] for c in job["containers"]] == [["metastore", "migrate"]]
    assert job["restartPolicy"] == "Never"


def test_migration_job_is_a_pre_install_pre_upgrade_hook(manifests: list[Manifest]) -> None:
    job = one(manifests, "Job")
    ann = job["metadata"]["annotations"]
    assert ann["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in ann["helm.sh/hook-delete-policy"]
    job_weight = int(ann["helm.sh/hook-weight"])
    # Whatever the Job needs from a hook (the password copy) is created before it.
    hook_secrets = [
        m
        for m in by_kind(manifests, "Secret")
        if "helm.sh/hook" in m["metadata"].get("annotations", {})
    ]
    env = env_of(job["spec"]["template"]["spec"]["containers"][0])
    for secret in hook_secrets:
        sann = secret["metadata"]["annotations"]
        assert sann["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert int(sann["helm.sh/hook-weight"]) < job_weight
        assert "hook-succeeded" in sann["helm.sh/hook-delete-policy"]
    if "PGPASSWORD" in env:
        name = env["PGPASSWORD"]["secretKeyRef"]["name"]
        chart_secrets = {m["metadata"]["name"]: m for m in by_kind(manifests, "Secret")}
        if name in chart_secrets:
            assert chart_secrets[name] in hook_secrets, "pre-install Job reads a non-hook Secret"
    # Nothing else is a hook, so the Deployments only roll out after the Job succeeded.
    for m in manifests:
        if m["kind"] not in ("Job", "Secret"):
            assert "helm.sh/hook" not in m["metadata"].get("annotations", {}), m["kind"]


def test_migration_can_be_disabled(helm: str) -> None:
    assert not by_kind(template(helm, "--set", "migration.enabled=false"), "Job")


@pytest.mark.parametrize(
    ("values", "scheme"), [("default", "http"), ("all-on", "https")], ids=["http", "https"]
)
def test_probes_and_ports_follow_the_scheme(
    values: str, scheme: str, request: pytest.FixtureRequest
) -> None:
    manifests = request.getfixturevalue(f"{values.replace('-', '_')}_manifests")
    for suffix, port_name in (("-api", scheme), ("-projector", "metrics")):
        (c,) = one(manifests, "Deployment", suffix)["spec"]["template"]["spec"]["containers"]
        (port,) = c["ports"]
        assert port["name"] == port_name
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            assert c[probe]["httpGet"] == {
                "path": path,
                "port": port_name,
                "scheme": scheme.upper(),
            }
        env = env_of(c)
        key = "METASTORE_PORT" if suffix == "-api" else "METASTORE_PROJECTOR_PORT"
        assert env[key] == str(port["containerPort"])
        assert ("METASTORE_TLS_CERT_FILE" in env) == (scheme == "https")
        assert c["resources"]["requests"] and c["resources"]["limits"]
    for suffix, port_name in (("-api", scheme), ("-projector-metrics", "metrics")):
        (svc_port,) = one(manifests, "Service", suffix)["spec"]["ports"]
        assert svc_port["targetPort"] == port_name
        assert svc_port["appProtocol"] == scheme


def test_replicas(default_manifests: list[Manifest], all_on_manifests: list[Manifest]) -> None:
    assert one(default_manifests, "Deployment", "-api")["spec"]["replicas"] == 2
    assert one(default_manifests, "Deployment", "-projector")["spec"]["replicas"] == 1
    assert one(all_on_manifests, "Deployment", "-projector")["spec"]["replicas"] == 2
    # With the HPA on, the Deployment leaves replicas to it.
    assert "replicas" not in one(all_on_manifests, "Deployment", "-api")["spec"]
    hpa = one(all_on_manifests, "HorizontalPodAutoscaler")
    assert (
        hpa["spec"]["scaleTargetRef"]["name"]
        == one(all_on_manifests, "Deployment", "-api")["metadata"]["name"]
    )
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    pdb = one(all_on_manifests, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 2 and "maxUnavailable" not in pdb["spec"]
    assert one(default_manifests, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_scheduling_options(all_on_manifests: list[Manifest]) -> None:
    for suffix in ("-api", "-projector"):
        d = one(all_on_manifests, "Deployment", suffix)
        spec = d["spec"]["template"]["spec"]
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert spec["tolerations"] and spec["affinity"] and spec["topologySpreadConstraints"]
        assert spec["priorityClassName"] == "high-priority"
        assert d["metadata"]["annotations"]["example.com/owner"] == "lineage"
        assert d["spec"]["template"]["metadata"]["annotations"]["example.com/scrape"] == "true"
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    job = one(all_on_manifests, "Job")["spec"]["template"]["spec"]
    assert job["nodeSelector"] and job["tolerations"] and job["affinity"]


# --------------------------------------------------------------------------------------
# configuration


def test_database_connection(manifests: list[Manifest]) -> None:
    for name, spec in pod_specs(manifests):
        env = env_of(spec["containers"][0])
        url = env["METASTORE_DATABASE_URL"]
        assert url.startswith("postgresql://") and "sslmode=" in url, name
        assert ":" not in url.split("//", 1)[1].split("@", 1)[0], f"{name}: password in URL"


def test_database_url_from_values(all_on_manifests: list[Manifest]) -> None:
    (c,) = one(all_on_manifests, "Deployment", "-api")["spec"]["template"]["spec"]["containers"]
    env = env_of(c)
    assert env["METASTORE_DATABASE_URL"] == (
        "postgresql://metastore_app@postgresql.databases.svc.cluster.local:5433/lineage"
        "?sslmode=verify-full&sslrootcert=/etc/metastore/db-ca/ca.crt"
        "&application_name=metastore&connect_timeout=10"
    )
    secret_name = env["PGPASSWORD"]["secretKeyRef"]["name"]
    assert secret_name == "ms-lineage-database"
    (secret,) = [
        s for s in by_kind(all_on_manifests, "Secret") if s["metadata"]["name"] == secret_name
    ]
    assert "annotations" not in secret["metadata"]  # a release resource, not a hook
    assert base64.b64decode(secret["data"]["password"]).decode() == "not-a-real-password"
    assert env["METASTORE_LOG_LEVEL"] == "debug" and env["METASTORE_LOG_FORMAT"] == "text"
    assert env["TZ"] == "UTC" and env["METASTORE_MAX_EVENT_BYTES"] == "16777216"
    assert env["METASTORE_MAX_INFLIGHT_BYTES"] == "67108864"
    assert env["METASTORE_REQUEST_TIMEOUT"] == "60" and env["METASTORE_POOL_SIZE"] == "4"
    assert env["METASTORE_READ_TIMEOUT"] == "20"
    assert {"name": "db-ca", "mountPath": "/etc/metastore/db-ca", "readOnly": True} in c[
        "volumeMounts"
    ]


def test_defaults_log_json_and_no_password(default_manifests: list[Manifest]) -> None:
    for name, spec in pod_specs(default_manifests):
        env = env_of(spec["containers"][0])
        assert env["METASTORE_LOG_FORMAT"] == "json", name
        assert "PGPASSWORD" not in env, name
    api = one(default_manifests, "Deployment", "-api")["spec"]["template"]["spec"]
    assert env_of(api["containers"][0])["METASTORE_MAX_EVENT_BYTES"] == "33554432"
    # sized by the API itself from the event limit and the container's memory limit
    assert "METASTORE_MAX_INFLIGHT_BYTES" not in env_of(api["containers"][0])


def test_existing_secrets(helm: str) -> None:
    ms = template(
        helm,
        "--set",
        "database.existingSecret=pg-creds",
        "--set",
        "database.existingSecretPasswordKey=pw",
        "--set",
        "database.password=ignored-when-existing",
        "--set",
        "auth.existingSecret=metastore-tokens",
        "--set",
        "auth.existingSecretKeys.ingest=producers",
    )
    assert not by_kind(ms, "Secret"), "no chart Secrets when existing ones are named"
    for name, spec in pod_specs(ms):
        env = env_of(spec["containers"][0])
        assert env["PGPASSWORD"] == {"secretKeyRef": {"name": "pg-creds", "key": "pw"}}, name
    api = one(ms, "Deployment", "-api")["spec"]["template"]["spec"]
    (tokens,) = [v for v in api["volumes"] if v["name"] == "tokens"]
    assert tokens["secret"]["secretName"] == "metastore-tokens"
    assert tokens["secret"]["items"] == [
        {"key": "producers", "path": "ingest"},
        {"key": "read", "path": "read"},
        {"key": "export", "path": "export"},
    ]


def test_tokens_are_mounted_as_files(manifests: list[Manifest]) -> None:
    api = one(manifests, "Deployment", "-api")["spec"]["template"]["spec"]
    (c,) = api["containers"]
    env = env_of(c)
    assert env["METASTORE_AUTH"] == "enabled"
    mount = next(m for m in c["volumeMounts"] if m["name"] == "tokens")
    assert mount["readOnly"] is True
    for scope in ("ingest", "read", "export"):
        assert env[f"METASTORE_{scope.upper()}_TOKENS_FILE"] == f"{mount['mountPath']}/{scope}"
        assert f"METASTORE_{scope.upper()}_TOKENS" not in env  # no tokens in the pod spec
    secret = one(manifests, "Secret", "-tokens")
    assert set(secret["data"]) == {"ingest", "read", "export"}
    # The projector and the migration get no tokens.
    for name, spec in pod_specs(manifests):
        if not name.endswith("-api"):
            assert "tokens" not in {v["name"] for v in spec["volumes"]}, name


def test_token_values(all_on_manifests: list[Manifest], default_manifests: list[Manifest]):
    def decoded(ms: list[Manifest]) -> dict[str, str]:
        data = one(ms, "Secret", "-tokens")["data"]
        return {k: base64.b64decode(v).decode() for k, v in data.items()}

    tokens = decoded(all_on_manifests)
    assert tokens["ingest"] == "ingest-token-0123456789abcdef\ningest-token-second-0123456789\n"
    assert tokens["read"] == "read-token-0123456789abcdef\n"
    assert len(tokens["export"].strip()) == 48  # generated
    generated = decoded(default_manifests)
    assert all(len(t.strip()) == 48 and t.strip().isalnum() for t in generated.values())
    assert len(set(generated.values())) == 3


def test_auth_disabled(helm: str) -> None:
    ms = template(helm, "--set", "auth.enabled=false")
    assert not [s for s in by_kind(ms, "Secret") if s["metadata"]["name"].endswith("-tokens")]
    (c,) = one(ms, "Deployment", "-api")["spec"]["template"]["spec"]["containers"]
    env = env_of(c)
    assert env["METASTORE_AUTH"] == "disabled"
    assert not any(k.endswith("_TOKENS_FILE") for k in env)


def test_image(default_manifests: list[Manifest], all_on_manifests: list[Manifest]) -> None:
    expected = f"oci.stackable.tech/sdp/metastore:{CHART_META['appVersion']}"
    for name, spec in pod_specs(default_manifests):
        assert [c["image"] for c in spec["containers"]] == [expected], name
    for name, spec in pod_specs(all_on_manifests):
        image = spec["containers"][0]["image"]
        assert image.startswith("registry.example.com/sdp/metastore@sha256:"), name
        assert spec["containers"][0]["imagePullPolicy"] == "Always"


def test_image_tag_override(helm: str) -> None:
    ms = template(helm, "--set", "image.tag=9.9.9")
    for _, spec in pod_specs(ms):
        assert spec["containers"][0]["image"] == "oci.stackable.tech/sdp/metastore:9.9.9"


def test_labels(manifests: list[Manifest]) -> None:
    for m in manifests:
        labels = m["metadata"]["labels"]
        what = f"{m['kind']}/{m['metadata']['name']}"
        assert labels["app.kubernetes.io/name"] in ("metastore", "lineage"), what
        assert labels["app.kubernetes.io/instance"] == RELEASE, what
        assert labels["app.kubernetes.io/managed-by"] == "Helm", what
        assert labels["app.kubernetes.io/version"], what
        assert labels["helm.sh/chart"] == f"metastore-{CHART_META['version']}", what
        assert labels["stackable.tech/vendor"] == "Stackable", what
        if m["kind"] in (
            "Deployment",
            "Job",
            "Service",
            "PodDisruptionBudget",
            "Ingress",
            "HorizontalPodAutoscaler",
            "Listener",
        ):
            assert labels["app.kubernetes.io/component"] in ("api", "projector", "migrate"), what
        if m["kind"] in ("Deployment", "Job"):
            pod_labels = m["spec"]["template"]["metadata"]["labels"]
            assert pod_labels["stackable.tech/vendor"] == "Stackable", what
            assert (
                pod_labels["app.kubernetes.io/component"] == labels["app.kubernetes.io/component"]
            ), what
        if m["kind"] == "Deployment":
            selector = m["spec"]["selector"]["matchLabels"]
            assert selector.items() <= m["spec"]["template"]["metadata"]["labels"].items()
            assert "app.kubernetes.io/version" not in selector  # immutable across upgrades
    # Each Service selects exactly the pods of one Deployment.
    deployments = by_kind(manifests, "Deployment")
    for svc in by_kind(manifests, "Service"):
        sel = svc["spec"]["selector"].items()
        matching = [
            d for d in deployments if sel <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(matching) == 1, svc["metadata"]["name"]


def test_default_names(default_manifests: list[Manifest]) -> None:
    names = {(m["kind"], m["metadata"]["name"]) for m in default_manifests}
    assert ("Deployment", "ms-metastore-api") in names
    assert ("Deployment", "ms-metastore-projector") in names
    assert ("Service", "ms-metastore-api") in names
    assert ("Service", "ms-metastore-projector-metrics") in names
    assert ("Job", "ms-metastore-migrate") in names
    assert all(m["metadata"]["namespace"] == NAMESPACE for m in default_manifests)


def test_ingress(all_on_manifests: list[Manifest]) -> None:
    ing = one(all_on_manifests, "Ingress")
    assert ing["spec"]["ingressClassName"] == "nginx"
    svc = one(all_on_manifests, "Service", "-api")["metadata"]["name"]
    backends = [
        p["backend"]["service"] for rule in ing["spec"]["rules"] for p in rule["http"]["paths"]
    ]
    assert len(backends) == 3
    assert all(b == {"name": svc, "port": {"name": "https"}} for b in backends)
    assert ing["spec"]["tls"][0]["secretName"] == "metastore-tls"


# --------------------------------------------------------------------------------------
# values are validated


TYPOS = {
    "misspelt-key": ["--set", "api.replicaCont=2"],
    "misspelt-top-level-key": ["--set", "replicaCount=2"],
    "wrong-type": ["--set-string", "api.replicas=two"],
    "wrong-enum": ["--set", "database.sslmode=requir"],
    "wrong-nested-key": ["--set", "database.caSecret.nmae=ca"],
    "port-out-of-range": ["--set", "api.port=70000"],
    "short-token": ["--set", "auth.tokens.ingest[0]=short"],
    "misspelt-tls-key": ["--set", "tls.secretClas=tls"],
    "tls-lifetime-not-a-duration": ["--set", "tls.certLifetime=forever"],
    "tls-secret-class-not-a-name": ["--set", "tls.secretClass=My_Class"],
    "misspelt-replica-key": ["--set", "database.readReplica.hots=pg-ro"],
    "replica-port-out-of-range": ["--set", "database.readReplica.port=0"],
    "listener-class-not-a-name": ["--set", "api.listenerClass=External Stable"],
    "catalog-without-metastore": ["--set", "catalogs[0].engine=e,catalogs[0].catalog=c"],
    "catalog-name-with-a-dot": [
        "--set",
        "catalogs[0].engine=e,catalogs[0].catalog=a.b,catalogs[0].metastore=m",
    ],
    "catalog-typo": ["--set", "catalogs[0].engnie=trino://t:8443"],
    "discovery-namespace": ["--set", "catalogDiscovery.namespaces[0]=Not_A_Namespace"],
}


@pytest.mark.parametrize("args", TYPOS.values(), ids=TYPOS.keys())
def test_values_typo_fails_template(helm: str, args: list[str]) -> None:
    result = run_helm(helm, "template", RELEASE, str(CHART), *args)
    assert result.returncode != 0, f"helm template accepted {args}"
    assert "schema" in result.stderr.lower() or "at '/" in result.stderr, result.stderr


def test_values_typo_fails_lint(helm: str, tmp_path: Path) -> None:
    bad = tmp_path / "typo.yaml"
    bad.write_text("api:\n  replicaCont: 2\n")
    result = run_helm(helm, "lint", "--strict", str(CHART), "-f", str(bad))
    assert result.returncode != 0
    assert "replicaCont" in result.stdout + result.stderr


def _objects(node: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            yield path, node
        for key, value in node.items():
            yield from _objects(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, f"{path}[{i}]")


def test_schema_closes_every_object() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    objects = list(_objects(schema))
    assert len(objects) > 30
    for path, node in objects:
        assert node.get("additionalProperties") is False, path


def _leaves(values: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in values.items():
        path = f"{prefix}{key}"
        if (
            isinstance(value, dict)
            and value
            and key not in ("resources", "livenessProbe", "readinessProbe")
        ):
            yield from _leaves(value, f"{path}.")
        else:
            yield path


def test_readme_lists_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    missing = [leaf for leaf in _leaves(DEFAULTS) if f"`{leaf}`" not in readme]
    assert not missing, f"values missing from deploy/helm/metastore/README.md: {missing}"


def test_all_on_values_turn_everything_on() -> None:
    on = yaml.safe_load(ALL_ON.read_text())
    for path in (
        "ingress",
        "serviceMonitor",
        "migration",
        "auth",
        "auth.oidc",
        "api.autoscaling",
        "api.podDisruptionBudget",
        "monitoring.prometheusRule",
        "monitoring.grafanaDashboard",
    ):
        node = on
        for part in path.split("."):
            node = node[part]
        assert node["enabled"] is True, path


# --------------------------------------------------------------------------------------
# NOTES.txt


def test_notes_show_how_to_connect_producers(helm: str) -> None:
    notes = install_notes(helm)
    url = f"http://{RELEASE}-metastore-api.{NAMESPACE}.svc.cluster.local:8080"
    assert f"{url}/ingest/openlineage" in notes
    for needle in (
        f"spark.openlineage.transport.url={url}",
        "spark.openlineage.transport.endpoint=/ingest/openlineage",
        f"openlineage-event-listener.transport.url={url}",
        "openlineage-event-listener.transport.endpoint=/ingest/openlineage",
        "AIRFLOW__OPENLINEAGE__TRANSPORT=",
        f"get secret {RELEASE}-metastore-tokens",
    ):
        assert needle in notes, needle
    airflow = notes.split("AIRFLOW__OPENLINEAGE__TRANSPORT='", 1)[1].split("'", 1)[0]
    transport = json.loads(airflow)
    assert transport["type"] == "http" and transport["url"] == url


def test_notes_with_ingress(helm: str) -> None:
    notes = install_notes(helm, "-f", str(ALL_ON))
    assert "https://metastore.example.com/ingest/openlineage" in notes


def test_extra_env_comes_last_and_can_override(helm: str) -> None:
    ms = template(
        helm,
        "--set", "config.extraEnv[0].name=METASTORE_LOG_LEVEL",
        "--set", "config.extraEnv[0].value=warning",
        "--set", "api.extraEnv[0].name=METASTORE_MAX_EVENT_BYTES",
        "--set-string", "api.extraEnv[0].value=1048576",
    )  # fmt: skip
    (c,) = one(ms, "Deployment", "-api")["spec"]["template"]["spec"]["containers"]
    names = [e["name"] for e in c["env"]]
    assert names[-2:] == ["METASTORE_LOG_LEVEL", "METASTORE_MAX_EVENT_BYTES"]
    env = env_of(c)  # the last occurrence wins, as in Kubernetes
    assert env["METASTORE_LOG_LEVEL"] == "warning"
    assert env["METASTORE_MAX_EVENT_BYTES"] == "1048576"


# --------------------------------------------------------------------------------------
# TLS, the listener, the read replica (the Stackable Data Platform's conventions)

TLS_SECRET_CLASS = ["--set", "tls.secretClass=tls"]
TLS_EXISTING_SECRET = ["--set", "tls.existingSecret=metastore-cert"]
READ_REPLICA = ["--set", "database.readReplica.host=postgresql-ro"]
RENDERS = {
    "tls-secret-class": TLS_SECRET_CLASS,
    "tls-existing-secret": TLS_EXISTING_SECRET,
    "read-replica": READ_REPLICA,
}


@pytest.mark.parametrize("args", RENDERS.values(), ids=RENDERS.keys())
@pytest.mark.parametrize("k8s_version", K8S_VERSIONS)
def test_tls_and_replica_renders_match_kubernetes_schemas(
    helm: str, args: list[str], k8s_version: str
) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    ms = template(helm, *args)
    for m in ms:
        try:
            kubernetes_validate.validate(m, k8s_version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = "/".join(str(p) for p in e.path)
            pytest.fail(f"{m['kind']}/{m['metadata']['name']}: {path}: {e.message}")


def _volume(spec: Manifest, name: str) -> Manifest:
    (volume,) = [v for v in spec["volumes"] if v["name"] == name]
    return volume


def test_secret_class_mounts_a_secret_operator_certificate(all_on_manifests: list[Manifest]):
    fullname = "ms-lineage"
    for suffix, service, scope_extra in (
        ("-api", f"{fullname}-api", ",listener-volume=listener"),
        ("-projector", f"{fullname}-projector-metrics", ""),
    ):
        spec = one(all_on_manifests, "Deployment", suffix)["spec"]["template"]["spec"]
        claim = _volume(spec, "tls")["ephemeral"]["volumeClaimTemplate"]
        assert claim["metadata"]["annotations"] == {
            "secrets.stackable.tech/class": "tls",
            "secrets.stackable.tech/scope": f"pod,service={service}{scope_extra}",
            "secrets.stackable.tech/format": "tls-pem",
            "secrets.stackable.tech/backend.autotls.cert.lifetime": "7d",
        }
        assert claim["spec"] == {
            "storageClassName": "secrets.stackable.tech",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1"}},
        }
        (c,) = spec["containers"]
        mount = next(m for m in c["volumeMounts"] if m["name"] == "tls")
        assert mount == {"name": "tls", "mountPath": "/etc/metastore/tls", "readOnly": True}
        env = env_of(c)
        assert env["METASTORE_TLS_CERT_FILE"] == "/etc/metastore/tls/tls.crt"
        assert env["METASTORE_TLS_KEY_FILE"] == "/etc/metastore/tls/tls.key"
        # The Service the certificate names is the one that selects these pods.
        svc = one(all_on_manifests, "Service", service.removeprefix(fullname))
        assert svc["metadata"]["name"] == service
    # Renewal evicts pods one at a time within the budget: ingest keeps answering.
    pdb = one(all_on_manifests, "PodDisruptionBudget")
    hpa = one(all_on_manifests, "HorizontalPodAutoscaler")
    assert pdb["spec"]["minAvailable"] >= 1
    assert hpa["spec"]["minReplicas"] > pdb["spec"]["minAvailable"]
    # The migration Job does not serve anything: no certificate.
    job = one(all_on_manifests, "Job")["spec"]["template"]["spec"]
    assert "tls" not in {v["name"] for v in job["volumes"]}


def test_existing_secret_mounts_its_certificate(helm: str) -> None:
    ms = template(helm, *TLS_EXISTING_SECRET)
    for suffix in ("-api", "-projector"):
        spec = one(ms, "Deployment", suffix)["spec"]["template"]["spec"]
        volume = _volume(spec, "tls")
        assert volume["secret"]["secretName"] == "metastore-cert"
        assert volume["secret"]["items"] == [
            {"key": "tls.crt", "path": "tls.crt"},
            {"key": "tls.key", "path": "tls.key"},
        ]
        (c,) = spec["containers"]
        assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
        assert env_of(c)["METASTORE_TLS_KEY_FILE"] == "/etc/metastore/tls/tls.key"
    assert one(ms, "Service", "-api")["spec"]["ports"][0]["name"] == "https"


def test_tls_sources_are_exclusive(helm: str) -> None:
    result = run_helm(
        helm, "template", RELEASE, str(CHART), *TLS_SECRET_CLASS, *TLS_EXISTING_SECRET
    )
    assert result.returncode != 0
    assert "either secretClass or existingSecret" in result.stderr


def test_no_tls_by_default(default_manifests: list[Manifest]) -> None:
    for _, spec in pod_specs(default_manifests):
        assert "tls" not in {v["name"] for v in spec["volumes"]}
        assert not {k for k in env_of(spec["containers"][0]) if k.startswith("METASTORE_TLS")}
    assert not by_kind(default_manifests, "Listener")


def test_listener_exposes_the_api(all_on_manifests: list[Manifest]) -> None:
    listener = one(all_on_manifests, "Listener")
    assert listener["apiVersion"] == "listeners.stackable.tech/v1alpha1"
    assert listener["metadata"]["name"] == "ms-lineage-api-listener"
    assert listener["metadata"]["labels"]["app.kubernetes.io/component"] == "api"
    assert listener["spec"] == {
        "className": "external-unstable",
        "ports": [{"name": "https", "port": 8081, "protocol": "TCP"}],
        # Emitters outside the cluster reach ready pods only (the operator's default: all).
        "publishNotReadyAddresses": False,
    }
    api = one(all_on_manifests, "Deployment", "-api")["spec"]["template"]["spec"]
    claim = _volume(api, "listener")["ephemeral"]["volumeClaimTemplate"]
    assert claim["metadata"]["annotations"] == {
        "listeners.stackable.tech/listener-name": listener["metadata"]["name"]
    }
    assert claim["spec"]["storageClassName"] == "listeners.stackable.tech"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    (c,) = api["containers"]
    assert {"name": "listener", "mountPath": "/etc/metastore/listener", "readOnly": True} in c[
        "volumeMounts"
    ]
    projector = one(all_on_manifests, "Deployment", "-projector")["spec"]["template"]["spec"]
    assert "listener" not in {v["name"] for v in projector["volumes"]}


def test_a_ca_for_the_database_means_verify_full(helm: str) -> None:
    """With the CA of the server's certificate the pods verify the server (host name and
    chain); without one they keep `prefer`; an sslmode given wins."""

    def urls(*args: str) -> set[str]:
        return {
            env_of(spec["containers"][0])["METASTORE_DATABASE_URL"]
            for _, spec in pod_specs(template(helm, *args))
        }

    with_ca = ["--set", "database.caSecret.name=postgresql-ca"]
    assert urls(*with_ca) == {
        "postgresql://metastore@postgresql:5432/metastore"
        "?sslmode=verify-full&sslrootcert=/etc/metastore/db-ca/ca.crt"
    }
    assert urls() == {"postgresql://metastore@postgresql:5432/metastore?sslmode=prefer"}
    (url,) = urls(*with_ca, "--set", "database.sslmode=verify-ca")
    assert "?sslmode=verify-ca&sslrootcert=" in url


def test_read_replica_url_goes_to_the_api_only(helm: str, all_on_manifests: list[Manifest]) -> None:
    (c,) = one(all_on_manifests, "Deployment", "-api")["spec"]["template"]["spec"]["containers"]
    assert env_of(c)["METASTORE_READ_DATABASE_URL"] == (
        "postgresql://metastore_app@postgresql-ro.databases.svc.cluster.local:5434/lineage"
        "?sslmode=verify-full&sslrootcert=/etc/metastore/db-ca/ca.crt"
        "&application_name=metastore&connect_timeout=10"
    )
    for name, spec in pod_specs(all_on_manifests):
        if not name.endswith("-api"):
            assert "METASTORE_READ_DATABASE_URL" not in env_of(spec["containers"][0]), name
    ms = template(helm, *READ_REPLICA)
    (c,) = one(ms, "Deployment", "-api")["spec"]["template"]["spec"]["containers"]
    assert env_of(c)["METASTORE_READ_DATABASE_URL"] == (
        "postgresql://metastore@postgresql-ro:5432/metastore?sslmode=prefer"
    )
    assert "METASTORE_READ_DATABASE_URL" not in env_of(
        one(template(helm), "Deployment", "-api")["spec"]["template"]["spec"]["containers"][0]
    )


def test_notes_with_tls_say_which_ca_to_trust(helm: str) -> None:
    notes = install_notes(helm, *TLS_SECRET_CLASS, "--set", "api.listenerClass=external-unstable")
    url = f"https://{RELEASE}-metastore-api.{NAMESPACE}.svc.cluster.local:8080"
    assert f"{url}/ingest/openlineage" in notes
    assert f"spark.openlineage.transport.url={url}" in notes
    assert 'trust the CA of the SecretClass "tls"' in notes
    assert "javax.net.ssl.trustStore=" in notes and "REQUESTS_CA_BUNDLE=" in notes
    assert f"get listener {RELEASE}-metastore-api-listener" in notes
    assert "WARNING: with tls.secretClass" not in notes  # 2 replicas and the PDB
    one_replica = install_notes(helm, *TLS_SECRET_CLASS, "--set", "api.replicas=1")
    assert "WARNING: with tls.secretClass" in one_replica


def test_notes_with_an_existing_secret_name_no_secret_operator_paths(helm: str) -> None:
    notes = install_notes(helm, *TLS_EXISTING_SECRET)
    assert "/stackable/metastore-ca" not in notes and "SecretClass" not in notes
    assert 'the certificate in the Secret "metastore-cert"' in notes
    assert (
        f"kubectl -n {NAMESPACE} get secret metastore-cert -o jsonpath='{{.data.ca\\.crt}}'"
        in notes
    )
    assert "javax.net.ssl.trustStore=<a truststore holding that CA>" in notes
    assert "REQUESTS_CA_BUNDLE=<that CA's certificate, a PEM file>" in notes
    assert "/api/v1/status" in notes


def test_probes_outlast_the_answers(manifests: list[Manifest]) -> None:
    """/readyz answers within a second whatever the database does: the probes wait longer."""
    from metastore import health
    from projections import runner

    answers = {
        "-api": health.PRIMARY_PROBE_TIMEOUT_S + health.REPLICA_PROBE_TIMEOUT_S,
        "-projector": runner.READY_TIMEOUT_S,
    }
    for suffix, answer in answers.items():
        assert answer < 1.0
        (c,) = one(manifests, "Deployment", suffix)["spec"]["template"]["spec"]["containers"]
        for probe in ("readinessProbe", "livenessProbe"):
            assert c[probe]["timeoutSeconds"] >= answer + 1, (suffix, probe)


def test_a_failed_container_says_why_in_its_status(manifests: list[Manifest]) -> None:
    for name, spec in pod_specs(manifests):
        for c in spec["containers"]:
            assert c["terminationMessagePolicy"] == "FallbackToLogsOnError", name


LEAST_PRIVILEGE = [
    "--set", "database.existingSecret=metastore-db",
    "--set", "database.api.user=metastore_api",
    "--set", "database.api.existingSecret=metastore-db-api",
    "--set", "database.projector.user=metastore_projector",
]  # fmt: skip


def test_api_and_projector_connect_as_roles_of_their_own(helm: str) -> None:
    ms = template(helm, *LEAST_PRIVILEGE, *READ_REPLICA)
    expected = {
        "-api": ("metastore_api", "metastore-db-api"),
        "-projector": ("metastore_projector", "metastore-db"),  # no Secret of its own
        "-migrate": ("metastore", "metastore-db"),
    }
    for name, spec in pod_specs(ms):
        (suffix,) = [s for s in expected if name.endswith(s)]
        user, secret = expected[suffix]
        env = env_of(spec["containers"][0])
        assert env["METASTORE_DATABASE_URL"].startswith(f"postgresql://{user}@postgresql:5432/")
        assert env["PGPASSWORD"] == {"secretKeyRef": {"name": secret, "key": "password"}}
        if suffix == "-api":
            assert env["METASTORE_READ_DATABASE_URL"].startswith(
                "postgresql://metastore_api@postgresql-ro:5432/"
            )
        if suffix == "-migrate":  # it grants them what their processes need
            assert env["METASTORE_API_ROLE"] == "metastore_api"
            assert env["METASTORE_PROJECTOR_ROLE"] == "metastore_projector"
        else:
            assert not {"METASTORE_API_ROLE", "METASTORE_PROJECTOR_ROLE"} & set(env)


def test_one_role_for_everything_by_default(default_manifests: list[Manifest]) -> None:
    for name, spec in pod_specs(default_manifests):
        env = env_of(spec["containers"][0])
        assert env["METASTORE_DATABASE_URL"].startswith("postgresql://metastore@"), name
        assert not {"METASTORE_API_ROLE", "METASTORE_PROJECTOR_ROLE"} & set(env), name


# --------------------------------------------------------------------------------------
# the catalog map


def _reads_the_config_map(
    pod: dict[str, Any], variable: str, volume_name: str, config_map: Manifest
) -> None:
    """The pod's container reads the file `variable` names from `config_map`, read-only."""
    (container,) = pod["spec"]["containers"]
    path = env_of(container)[variable]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume_name]
    (key,) = config_map["data"]
    assert mount["readOnly"] is True and path == f"{mount['mountPath']}/{key}"
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == volume_name]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]


def _checksum(helm: str, deployment: str, annotation: str, *sets: str) -> str:
    """The pod annotation `annotation` of `deployment` rendered with values `sets`."""
    ms = template(helm, *(x for v in sets for x in ("--set", v)))
    pod = one(ms, "Deployment", deployment)["spec"]["template"]
    return str(pod["metadata"]["annotations"][annotation])


def test_the_catalog_map_is_a_configmap_the_projector_reads(
    all_on_manifests: list[Manifest],
) -> None:
    from metastore.catalogs import parse_catalog_map

    config_map = one(all_on_manifests, "ConfigMap", "-catalogs")
    text = config_map["data"]["catalogs.yaml"]
    catalogs = parse_catalog_map(text, "catalogs.yaml")  # what the projector will read
    assert [(e.engine, e.catalog, e.metastore) for e in catalogs.entries] == [
        ("trino://trino-coordinator-*:8443", "lakehouse", "hive://hive-metastore:9083"),
        (
            "trino://trino-coordinator.lakehouse.svc.cluster.local:8443",
            "iceberg",
            "hive://hive-iceberg:9083",
        ),
    ]
    projector = one(all_on_manifests, "Deployment", "-projector")["spec"]["template"]
    _reads_the_config_map(projector, "METASTORE_CATALOGS_FILE", "catalogs", config_map)
    # a changed map rolls the projector, which then re-derives the datasets
    assert "checksum/catalogs" in projector["metadata"]["annotations"]
    (api,) = one(all_on_manifests, "Deployment", "-api")["spec"]["template"]["spec"]["containers"]
    assert "METASTORE_CATALOGS_FILE" not in env_of(api)


def test_no_catalog_map_by_default(default_manifests: list[Manifest]) -> None:
    assert not by_kind(default_manifests, "ConfigMap")
    assert not by_kind(default_manifests, "Role") and not by_kind(default_manifests, "RoleBinding")
    projector = one(default_manifests, "Deployment", "-projector")["spec"]["template"]
    (container,) = projector["spec"]["containers"]
    assert "METASTORE_CATALOGS_FILE" not in env_of(container)
    assert "checksum/catalogs" not in projector["metadata"]["annotations"]


def test_a_changed_catalog_map_changes_the_projectors_pod_template(helm: str) -> None:
    def annotation(metastore: str) -> str:
        return _checksum(
            helm,
            "-projector",
            "checksum/catalogs",
            "catalogs[0].engine=trino://t:8443",
            "catalogs[0].catalog=lakehouse",
            f"catalogs[0].metastore={metastore}",
        )

    assert annotation("hive://a:9083") != annotation("hive://b:9083")


# --------------------------------------------------------------------------------------
# cadence overrides


def test_cadence_overrides_are_a_configmap_the_api_reads(
    all_on_manifests: list[Manifest],
) -> None:
    from metastore.cadence_overrides import parse

    config_map = one(all_on_manifests, "ConfigMap", "-cadence-overrides")
    compiled = parse(config_map["data"]["overrides.json"], "overrides.json")  # as the api
    assert compiled is not None
    assert [
        (o["namespace"], o["name"], o["cadence"], o["period"], o["tolerance"], o["ignore"])
        for o in json.loads(compiled)
    ] == [
        ("airflow://prod", "nightly\\_%", "daily", 86400, 7200, False),
        ("airflow://%", "legacy\\__", None, None, None, True),
        ("spark://etl", "compaction", "regular", 21600, None, False),
    ]
    api = one(all_on_manifests, "Deployment", "-api")["spec"]["template"]
    _reads_the_config_map(api, "METASTORE_CADENCE_OVERRIDES", "cadence-overrides", config_map)
    assert "checksum/cadence-overrides" in api["metadata"]["annotations"]
    projector = one(all_on_manifests, "Deployment", "-projector")["spec"]["template"]
    assert "METASTORE_CADENCE_OVERRIDES" not in env_of(projector["spec"]["containers"][0])


def test_no_cadence_overrides_by_default(default_manifests: list[Manifest]) -> None:
    api = one(default_manifests, "Deployment", "-api")["spec"]["template"]
    assert "METASTORE_CADENCE_OVERRIDES" not in env_of(api["spec"]["containers"][0])
    assert "checksum/cadence-overrides" not in api["metadata"]["annotations"]


def test_a_changed_cadence_override_rolls_the_api_and_a_wrong_one_is_refused(helm: str) -> None:
    entry = ("cadenceOverrides[0].namespace=airflow://prod", "cadenceOverrides[0].name=nightly")
    checksums = {
        _checksum(helm, "-api", "checksum/cadence-overrides", *entry, f"{tolerance}={seconds}")
        for tolerance in ["cadenceOverrides[0].toleranceSeconds"]
        for seconds in (600, 900)
    }
    assert len(checksums) == 2
    refused = run_helm(
        helm, "template", RELEASE, str(CHART),
        "--set", "cadenceOverrides[0].namespace=a",
        "--set", "cadenceOverrides[0].name=b",
        "--set", "cadenceOverrides[0].cadence=monthly",
    )  # fmt: skip
    assert refused.returncode != 0 and "cadence" in refused.stderr


def test_catalog_discovery_reads_the_trino_catalogs_with_a_read_only_role(
    all_on_manifests: list[Manifest],
) -> None:
    roles = {r["metadata"]["namespace"]: r for r in by_kind(all_on_manifests, "Role")}
    bindings = {b["metadata"]["namespace"]: b for b in by_kind(all_on_manifests, "RoleBinding")}
    assert set(roles) == set(bindings) == {"lineage", "trino"}
    sa = one(all_on_manifests, "ServiceAccount")["metadata"]["name"]
    for namespace, role in roles.items():
        assert role["rules"] == [
            {
                "apiGroups": ["trino.stackable.tech"],
                "resources": ["trinoclusters", "trinocatalogs"],
                "verbs": ["get", "list"],
            },
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
        ]
        binding = bindings[namespace]
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}
        ]
    token_path = "/var/run/secrets/kubernetes.io/serviceaccount"
    for name, spec in pod_specs(all_on_manifests):
        (container,) = spec["containers"]
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        if name.endswith("-projector"):
            assert env_of(container)["METASTORE_CATALOGS_FROM_KUBERNETES"] == "lineage,trino"
            assert token_path in mounts  # the projector alone gets a token
            (volume,) = [v for v in spec["volumes"] if v["name"] == "kubernetes-api"]
            sources = volume["projected"]["sources"]
            assert sources[0]["serviceAccountToken"]["path"] == "token"
        else:
            assert token_path not in mounts, name
            assert "METASTORE_CATALOGS_FROM_KUBERNETES" not in env_of(container), name


def test_catalog_discovery_reads_the_release_namespace_by_default(helm: str) -> None:
    ms = template(helm, "--set", "catalogDiscovery.enabled=true")
    assert [r["metadata"]["namespace"] for r in by_kind(ms, "Role")] == [NAMESPACE]
    (container,) = one(ms, "Deployment", "-projector")["spec"]["template"]["spec"]["containers"]
    assert env_of(container)["METASTORE_CATALOGS_FROM_KUBERNETES"] == NAMESPACE
