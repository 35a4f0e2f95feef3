"""The chart's identities (values auth.namedTokens and auth.oidc): what the api pods get,
and that the process reads it as meant (the rendered file and variables through
metastore.config, the code the api starts with)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metastore.config import load_settings
from tests.certs import make_ca
from tests.deploy.helm import CHART, NAMESPACE, RELEASE, Manifest, run_helm, template
from tests.deploy.test_helm import env_of, one

MOUNT = "/etc/metastore/named-tokens"


def _api(manifests: list[Manifest]) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = one(manifests, "Deployment", "-api")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return spec, container


def test_named_tokens_come_from_their_secrets_as_files(
    all_on_manifests: list[Manifest], tmp_path: Path
) -> None:
    spec, container = _api(all_on_manifests)
    env = env_of(container)
    assert env["METASTORE_TOKENS_FILE"] == f"{MOUNT}/tokens.json"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "named-tokens")
    assert (mount["mountPath"], mount["readOnly"]) == (MOUNT, True)
    (volume,) = [v for v in spec["volumes"] if v["name"] == "named-tokens"]
    sources = volume["projected"]["sources"]
    assert sources[1:] == [
        {
            "secret": {
                "name": "cockpit-metastore-token",
                "items": [{"key": "token", "path": "cockpit"}],
            }
        },
        {
            "secret": {
                "name": "emitter-tokens",
                "items": [{"key": "spark-sales", "path": "spark-sales"}],
            }
        },
    ]
    configmap = one(all_on_manifests, "ConfigMap", "-named-tokens")
    assert sources[0]["configMap"]["name"] == configmap["metadata"]["name"]
    # No token in the ConfigMap or the pod spec, only where the Secrets' keys are mounted.
    assert "token-" not in json.dumps(configmap) + json.dumps(spec).replace("named-tokens", "")
    # The api reads the rendered file with the Secrets' keys where the volume puts them.
    (tmp_path / "cockpit").write_text("cockpit-token-from-the-secret\n")
    (tmp_path / "spark-sales").write_text("spark-token-from-the-secret\n")
    rendered = configmap["data"]["tokens.json"].replace(MOUNT, str(tmp_path))
    (tmp_path / "tokens.json").write_text(rendered)
    settings = load_settings({"METASTORE_TOKENS_FILE": str(tmp_path / "tokens.json")})
    assert [
        (t.name, t.token, t.scopes, t.groups, t.act_for_users) for t in settings.named_tokens
    ] == [
        ("cockpit", "cockpit-token-from-the-secret", ["read"], [], True),
        ("spark-sales", "spark-token-from-the-secret", ["ingest", "read"], ["sales"], False),
    ]
    # today's per-scope token files are still there
    assert env["METASTORE_READ_TOKENS_FILE"] == "/etc/metastore/tokens/read"
    # a change of the named tokens rolls the api pods
    annotations = one(all_on_manifests, "Deployment", "-api")["spec"]["template"]["metadata"]
    assert "checksum/named-tokens" in annotations["annotations"]


def test_oidc_takes_an_authentication_class_provider(
    all_on_manifests: list[Manifest], tmp_path: Path
) -> None:
    spec, container = _api(all_on_manifests)
    env = env_of(container)
    assert {k: v for k, v in env.items() if k.startswith("METASTORE_OIDC_")} == {
        "METASTORE_OIDC_ISSUER": "https://keycloak.idp.svc.cluster.local:8443/realms/platform",
        "METASTORE_OIDC_AUDIENCE": "metastore",
        "METASTORE_OIDC_PRINCIPAL_CLAIM": "preferred_username",
        "METASTORE_OIDC_GROUPS_CLAIM": "groups",
        "METASTORE_OIDC_SCOPES": "read,export",
        "METASTORE_OIDC_CA_FILE": "/etc/metastore/oidc-ca/ca.crt",
    }
    (volume,) = [v for v in spec["volumes"] if v["name"] == "oidc-ca"]
    claim = volume["ephemeral"]["volumeClaimTemplate"]
    assert claim["metadata"]["annotations"] == {
        "secrets.stackable.tech/class": "tls",
        "secrets.stackable.tech/format": "tls-pem",
    }
    mount = next(m for m in container["volumeMounts"] if m["name"] == "oidc-ca")
    assert mount["mountPath"] == "/etc/metastore/oidc-ca"
    # the variables are what the api accepts
    ca = make_ca(tmp_path)
    oidc_env = {k: v for k, v in env.items() if k.startswith("METASTORE_OIDC_")}
    oidc = load_settings({**oidc_env, "METASTORE_OIDC_CA_FILE": str(ca.cert)}).oidc
    assert oidc is not None and oidc.scopes == {"read", "export"}
    # only the api authenticates
    for suffix in ("-projector",):
        other = one(all_on_manifests, "Deployment", suffix)["spec"]["template"]["spec"]
        assert not {"named-tokens", "oidc-ca"} & {v["name"] for v in other["volumes"]}


@pytest.mark.parametrize(
    ("tls", "issuer", "ca_file"),
    [
        ("null", "http://keycloak:80/realms/platform", None),
        (
            "{verification: {server: {caCert: {webPki: {}}}}}",
            "https://keycloak:443/realms/platform",
            None,
        ),
    ],
    ids=["http", "web-pki"],
)
def test_oidc_scheme_and_port_follow_tls(
    helm: str, tmp_path: Path, tls: str, issuer: str, ca_file: str | None
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "auth:\n  oidc:\n    enabled: true\n    audience: metastore\n    provider:\n"
        f"      hostname: keycloak\n      rootPath: realms/platform\n      tls: {tls}\n"
    )
    spec, container = _api(template(helm, values=values))
    env = env_of(container)
    assert env["METASTORE_OIDC_ISSUER"] == issuer
    assert env.get("METASTORE_OIDC_CA_FILE") == ca_file
    assert "oidc-ca" not in {v["name"] for v in spec["volumes"]}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["auth.oidc.enabled=true", "auth.oidc.audience=m"], "auth.oidc.provider.hostname"),
        (["auth.oidc.enabled=true", "auth.oidc.provider.hostname=kc"], "auth.oidc.audience"),
        (["auth.namedTokens[0].name=cockpit", "auth.namedTokens[0].scopes[0]=read"], "secretName"),
        (
            [
                "auth.namedTokens[0].name=cockpit",
                "auth.namedTokens[0].secretName=s",
                "auth.namedTokens[0].scopes[0]=write",
            ],
            "/auth/namedTokens/0/scopes/0",
        ),
    ],
    ids=["no-hostname", "no-audience", "no-secret", "unknown-scope"],
)
def test_wrong_auth_values_fail_naming_them(helm: str, args: list[str], message: str) -> None:
    cmd = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for arg in args:
        cmd += ["--set", arg]
    result = run_helm(helm, *cmd)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_verification_none_is_refused(helm: str, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "auth:\n  oidc:\n    enabled: true\n    audience: metastore\n    provider:\n"
        "      hostname: keycloak\n      tls: {verification: {none: {}}}\n"
    )
    result = run_helm(
        helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(values)
    )
    assert result.returncode != 0
    assert "always checks the issuer's certificate" in result.stderr
