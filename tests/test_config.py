"""Configuration mistakes: each names its variable, and a command stops with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from metastore.config import VARIABLES, ConfigError, default_inflight_bytes, load_settings
from metastore.embedded_pg import free_port

# A wrong value for every variable that has a format (the others are free text).
BAD_VALUES = [
    ("METASTORE_PORT", "eighty"),
    ("METASTORE_PORT", "0"),
    ("METASTORE_PROJECTOR_PORT", "65536"),
    ("METASTORE_LOG_LEVEL", "verbose"),
    ("METASTORE_LOG_FORMAT", "yaml"),
    ("METASTORE_MAX_EVENT_BYTES", "0"),
    ("METASTORE_MAX_EVENT_BYTES", "32MB"),
    ("METASTORE_MAX_INFLIGHT_BYTES", "0"),
    ("METASTORE_MAX_INFLIGHT_BYTES", "1GB"),
    ("METASTORE_MAX_INFLIGHT_BYTES", "1048576"),  # below METASTORE_MAX_EVENT_BYTES
    ("METASTORE_REQUEST_TIMEOUT", "-5"),
    ("METASTORE_REQUEST_TIMEOUT", "nan"),
    ("METASTORE_READ_TIMEOUT", "0"),
    ("METASTORE_READ_TIMEOUT", "ten"),
    ("METASTORE_STALL_TIMEOUT", "0"),
    ("METASTORE_STALL_TIMEOUT", "1m"),
    ("METASTORE_POOL_SIZE", "0"),
    ("METASTORE_POOL_SIZE", "many"),
    ("METASTORE_AUTH", "off"),
    ("METASTORE_INGEST_TOKENS_FILE", "/nonexistent/ingest-tokens"),
    ("METASTORE_READ_TOKENS_FILE", "/nonexistent/read-tokens"),
    ("METASTORE_EXPORT_TOKENS_FILE", "/nonexistent/export-tokens"),
    ("METASTORE_CATALOGS_FILE", "/nonexistent/catalogs.yaml"),
    ("METASTORE_TOKENS_FILE", "/nonexistent/tokens.json"),
    ("METASTORE_POLICY_FILE", "/nonexistent/policy.json"),
    ("METASTORE_CADENCE_OVERRIDES", "/nonexistent/cadences.json"),
    ("METASTORE_OIDC_ISSUER", "keycloak:8443/realms/platform"),  # no scheme
    ("METASTORE_OIDC_AUDIENCE", "metastore"),  # without an issuer
    ("METASTORE_OIDC_CA_FILE", "/nonexistent/ca.crt"),
    ("METASTORE_OIDC_SCOPES", "read,write"),
    ("METASTORE_OPA_URL", "opa:8081"),
    ("METASTORE_OPA_PACKAGE", "stackable/metastore"),
    ("METASTORE_OPA_CA_FILE", "/nonexistent/opa-ca.crt"),
    ("METASTORE_OPA_TIMEOUT", "0"),
    ("METASTORE_OPA_CACHE_SECONDS", "30s"),
    ("METASTORE_OPA_CACHE_SIZE", "0"),
]


def metastore(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    return subprocess.run(
        [sys.executable, "-m", "metastore", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
    )


def test_every_variable_with_a_format_is_checked() -> None:
    checked = {name for name, _ in BAD_VALUES}
    free_text = {
        "METASTORE_DATABASE_URL",
        "METASTORE_READ_DATABASE_URL",
        "METASTORE_HOST",
        "METASTORE_CATALOGS_FROM_KUBERNETES",
        "METASTORE_API_ROLE",
        "METASTORE_PROJECTOR_ROLE",
        "METASTORE_OIDC_PRINCIPAL_CLAIM",
        "METASTORE_OIDC_GROUPS_CLAIM",
    } | {f"METASTORE_{scope}_TOKENS" for scope in ("INGEST", "READ", "EXPORT")}
    # The TLS files' mistakes are checked case by case in tests/test_tls.py.
    tls_files = {
        "METASTORE_TLS_CERT_FILE",
        "METASTORE_TLS_KEY_FILE",
        "METASTORE_TLS_CLIENT_CA_FILE",
    }
    assert checked | free_text | tls_files == {name for name, _, _ in VARIABLES}


@pytest.mark.parametrize(("name", "value"), BAD_VALUES)
def test_a_wrong_value_is_an_error_naming_the_variable_and_the_value(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings({name: value})
    message = str(error.value)
    assert message.startswith(name) and value in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ('[{"namespace": "a", "name": "b"}]', "says nothing"),
        ('[{"namespace": "a", "name": "b", "cadence": "daily", "period_seconds": 60}]', "not both"),
        ('[{"namespace": "a", "name": "b", "ignore": true, "tolerance_seconds": 60}]', "ignore"),
        ('[{"namespace": "a", "name": "b", "cadence": "monthly"}]', "cadence"),
        ('[{"namespace": "a", "name": "b", "tolerance_seconds": -1}]', "tolerance_seconds"),
        ('[{"namespace": "a", "nam": "b", "ignore": true}]', "nam"),
        ("[{", "not JSON"),
        ('{"namespace": "a"}', "array"),
    ],
)
def test_a_wrong_cadence_override_names_the_file_and_what_is_wrong(
    tmp_path: Path, entries: str, reason: str
) -> None:
    path = tmp_path / "cadences.json"
    path.write_text(entries)
    with pytest.raises(ConfigError, match=rf"^METASTORE_CADENCE_OVERRIDES=[^\n]*{reason}"):
        load_settings({"METASTORE_CADENCE_OVERRIDES": str(path)})


def test_an_oidc_issuer_needs_its_audience(tmp_path: Path) -> None:
    issuer = {"METASTORE_OIDC_ISSUER": "https://keycloak:8443/realms/platform/"}
    with pytest.raises(ConfigError, match="METASTORE_OIDC_AUDIENCE is required"):
        load_settings(issuer)
    not_pem = tmp_path / "ca.crt"
    not_pem.write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"METASTORE_OIDC_CA_FILE=.*cannot be read"):
        load_settings({**issuer, "METASTORE_OIDC_CA_FILE": str(not_pem)})
    oidc = load_settings({**issuer, "METASTORE_OIDC_AUDIENCE": "metastore"}).oidc
    assert oidc is not None
    # rootPath's trailing slash is not part of the issuer; discovery is below it
    assert (oidc.issuer, oidc.principal_claim, oidc.scopes) == (
        "https://keycloak:8443/realms/platform",
        "preferred_username",
        frozenset({"read"}),
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("METASTORE_REQUEST_TIMEOUT", "0"),
        ("METASTORE_POOL_SIZE", "-1"),
        ("METASTORE_READ_TOKENS_FILE", "/nonexistent/read-tokens"),
    ],
)
@pytest.mark.parametrize("command", ["api", "projector", "migrate"])
def test_a_command_stops_with_one_line_naming_the_variable(
    command: str, name: str, value: str
) -> None:
    result = metastore(
        command,
        env={
            name: value,
            "METASTORE_DATABASE_URL": "postgresql://127.0.0.1:1/x",
            "METASTORE_INGEST_TOKENS": "s3cret-ingest-token",
        },
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0], result.stderr
    assert "s3cret-ingest-token" not in result.stderr


def test_token_values_never_appear_in_a_config_error(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("file-token-value\n")
    tokens.chmod(0)
    env = {
        "METASTORE_EXPORT_TOKENS": "env-token-value",
        "METASTORE_EXPORT_TOKENS_FILE": str(tokens),
    }
    if os.geteuid() == 0:  # root reads any file: make the path unreadable another way
        env["METASTORE_EXPORT_TOKENS_FILE"] = str(tmp_path)
    with pytest.raises(ConfigError) as error:
        load_settings(env)
    assert "METASTORE_EXPORT_TOKENS_FILE" in str(error.value)
    assert "token-value" not in str(error.value)


def test_api_refuses_to_start_without_tokens_unless_auth_is_disabled_explicitly() -> None:
    result = metastore("api", env={"METASTORE_DATABASE_URL": "postgresql://127.0.0.1:1/x"})
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "METASTORE_AUTH=disabled" in lines[0], result.stderr
    # with the opt-out the token check passes: it serves, and waits for the database
    clean = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    opted_out = subprocess.Popen(
        [sys.executable, "-m", "metastore", "api"],
        stderr=subprocess.PIPE,
        text=True,
        env={
            **clean,
            "METASTORE_DATABASE_URL": "postgresql://127.0.0.1:1/x",
            "METASTORE_AUTH": "disabled",
            "METASTORE_HOST": "127.0.0.1",
            "METASTORE_PORT": str(free_port()),
        },
    )
    try:
        assert opted_out.stderr is not None
        # (uvicorn's start-up lines, the pool's own warnings and the first wait line come
        # in any order on a loaded machine; the wait line repeats, so reading stops)
        seen: list[str] = []
        while len(seen) < 20 and not any("waiting for the database" in s for s in seen):
            seen.append(opted_out.stderr.readline())
        assert any("waiting for the database: connection failed" in s for s in seen), seen
    finally:
        opted_out.terminate()
        opted_out.communicate(timeout=30)


def test_dev_refuses_to_run_open_on_a_non_loopback_address() -> None:
    result = metastore("dev", "--host", "0.0.0.0", env={})
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not loopback" in lines[0], result.stderr


MiB = 1024 * 1024


@pytest.mark.parametrize(
    ("max_event", "memory", "budget"),
    [
        (32 * MiB, 24 * 1024 * MiB, 128 * MiB),  # this machine: four maximal requests
        (32 * MiB, 1024 * MiB, 64 * MiB),  # a 1 GiB container: 1/16 of it
        (32 * MiB, 256 * MiB, 32 * MiB),  # never less than one maximal request
        (1 * MiB, 24 * 1024 * MiB, 4 * MiB),
    ],
)
def test_the_inflight_budget_defaults_to_four_maximal_requests_within_a_sixteenth_of_memory(
    max_event: int, memory: int, budget: int
) -> None:
    assert default_inflight_bytes(max_event, memory) == budget


def test_the_inflight_budget_follows_the_event_limit_unless_set() -> None:
    assert load_settings({}).max_inflight_bytes == default_inflight_bytes(32 * MiB)
    small = load_settings({"METASTORE_MAX_EVENT_BYTES": str(MiB)})
    assert small.max_inflight_bytes == default_inflight_bytes(MiB)
    assert load_settings({"METASTORE_MAX_INFLIGHT_BYTES": str(40 * MiB)}).max_inflight_bytes == (
        40 * MiB
    )
