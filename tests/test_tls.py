"""TLS on the API's port and the projector's: HTTPS with a certificate made in the test.

A client that trusts the test CA ingests (the real OpenLineage client among them), reads
and exports over HTTPS; plain HTTP on the same port fails; a wrong TLS file stops the
process at start with one line naming its variable.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

from metastore.config import ConfigError, load_settings
from metastore.tls import RELOAD_CHECK_S
from projections.runner import catch_up
from tests.certs import Pair, issue, make_ca
from tests.emitter import openlineage_client
from tests.support import running

INGEST_TOKEN = "tls-ingest-token-0123456789"
READ_TOKEN = "tls-read-token-0123456789"
EXPORT_TOKEN = "tls-export-token-0123456789"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair]:
    folder = tmp_path_factory.mktemp("pki")
    ca = make_ca(folder)
    other_ca = make_ca(folder, "other-ca")
    return {
        "ca": ca,
        "server": issue(ca, folder, "server"),
        "client": issue(ca, folder, "client", client=True),
        "other-ca": other_ca,
        "stranger": issue(other_ca, folder, "stranger", client=True),
    }


def trusting(ca: Pair, client: Pair | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca.cert))
    if client is not None:
        context.load_cert_chain(str(client.cert), str(client.key))
    return context


def tls_env(pki: dict[str, Pair], **extra: str) -> dict[str, str]:
    return {
        "METASTORE_TLS_CERT_FILE": str(pki["server"].cert),
        "METASTORE_TLS_KEY_FILE": str(pki["server"].key),
        "METASTORE_AUTH": "enabled",
        "METASTORE_INGEST_TOKENS": INGEST_TOKEN,
        "METASTORE_READ_TOKENS": READ_TOKEN,
        "METASTORE_EXPORT_TOKENS": EXPORT_TOKEN,
        **extra,
    }


def run_event(job: str, run_id: str) -> dict[str, Any]:
    return {
        "eventType": "COMPLETE",
        "eventTime": dt.datetime.now(dt.UTC).isoformat(),
        "run": {"runId": run_id},
        "job": {"namespace": "tls", "name": job},
        "inputs": [],
        "outputs": [{"namespace": "s3a://warehouse", "name": f"{job}/out"}],
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def plain_http_fails(url: str) -> None:
    """A plain-HTTP request to an HTTPS port gets no HTTP answer."""
    with pytest.raises(httpx.TransportError):
        httpx.get(url.replace("https://", "http://", 1), timeout=5)


def test_https_ingest_read_and_export_with_a_client_that_trusts_the_ca(
    database_url: str, tmp_path: Path, pki: dict[str, Pair]
) -> None:
    verify = trusting(pki["ca"])
    with running("api", database_url, tmp_path, env=tls_env(pki), verify=verify) as api:
        assert api.base_url.startswith("https://127.0.0.1:")
        ingest = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        with httpx.Client(base_url=api.base_url, verify=verify, timeout=10) as client:
            answer = client.post(
                "/ingest/openlineage", json=run_event("orders", str(uuid.uuid4())), headers=ingest
            )
            assert answer.status_code == 200, answer.text
            # The real OpenLineage client, trusting the CA as an emitter would (caCertPath).
            openlineage_client(
                api.base_url,
                INGEST_TOKEN,
                endpoint="ingest/openlineage",
                sslContext={"caCertPath": str(pki["ca"].cert)},
            ).emit(
                RunEvent(
                    eventType=RunState.COMPLETE,
                    eventTime=dt.datetime.now(dt.UTC).isoformat(),
                    run=Run(runId=str(uuid.uuid4())),
                    job=Job(namespace="tls", name="customers"),
                    producer=PRODUCER,
                )
            )
            catch_up(database_url)
            jobs = client.get(
                "/api/v1/jobs",
                params={"namespace": "tls"},
                headers={"Authorization": f"Bearer {READ_TOKEN}"},
            )
            assert jobs.status_code == 200, jobs.text
            assert sorted(j["name"] for j in jobs.json()["items"]) == ["customers", "orders"]
            feed = client.get(
                "/export/openlineage/events", headers={"Authorization": f"Bearer {EXPORT_TOKEN}"}
            )
            assert [e["job"]["name"] for e in feed.json()["events"]] == ["orders", "customers"]
        plain_http_fails(api.base_url + "/healthz")
        # A client that does not trust the CA refuses the server's certificate.
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(api.base_url + "/healthz", timeout=5)
        # Nothing reached the log by the plain-HTTP attempt.
        with psycopg.connect(database_url) as conn:
            row = conn.execute("SELECT count(*) FROM event_log").fetchone()
            assert row is not None and row[0] == 2


def test_a_client_ca_requires_a_client_certificate(
    database_url: str, tmp_path: Path, pki: dict[str, Pair]
) -> None:
    env = tls_env(pki, METASTORE_TLS_CLIENT_CA_FILE=str(pki["ca"].cert))
    verify = trusting(pki["ca"], pki["client"])
    with running("api", database_url, tmp_path, env=env, verify=verify) as api:
        ok = httpx.get(api.base_url + "/readyz", verify=verify, timeout=5)
        assert ok.status_code == 200
        for context in (trusting(pki["ca"]), trusting(pki["ca"], pki["stranger"])):
            with pytest.raises(httpx.TransportError):
                httpx.get(api.base_url + "/readyz", verify=context, timeout=5).raise_for_status()


def test_the_projector_serves_its_metrics_over_https(
    database_url: str, tmp_path: Path, pki: dict[str, Pair]
) -> None:
    verify = trusting(pki["ca"])
    with running("projector", database_url, tmp_path, env=tls_env(pki), verify=verify) as proj:
        metrics = httpx.get(proj.base_url + "/metrics", verify=verify, timeout=5)
        assert metrics.status_code == 200 and "metastore_" in metrics.text
        ready = httpx.get(proj.base_url + "/readyz", verify=verify, timeout=5)
        assert ready.status_code == 200
        plain_http_fails(proj.base_url + "/metrics")
        # The plain-HTTP client, which failed its handshake, did not stop the port.
        assert httpx.get(proj.base_url + "/healthz", verify=verify, timeout=5).status_code == 200


# --------------------------------------------------------------------------------------
# wrong files stop the start


def _bad_settings(pki: dict[str, Pair], tmp: Path) -> dict[str, tuple[str, dict[str, str]]]:
    not_pem = tmp / "not-pem.txt"
    not_pem.write_text("hello\n")
    broken = tmp / "broken.crt"
    broken.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    encrypted = tmp / "encrypted.key"
    subprocess.run(
        ["openssl", "pkey", "-in", str(pki["server"].key), "-out", str(encrypted),
         "-aes256", "-passout", "pass:secret"],
        check=True, capture_output=True,
    )  # fmt: skip
    server = pki["server"]
    good = {"METASTORE_TLS_CERT_FILE": str(server.cert), "METASTORE_TLS_KEY_FILE": str(server.key)}
    cert, key, ca = (
        "METASTORE_TLS_CERT_FILE",
        "METASTORE_TLS_KEY_FILE",
        "METASTORE_TLS_CLIENT_CA_FILE",
    )
    return {
        "missing-cert": (cert, {**good, cert: str(tmp / "nope.crt")}),
        "cert-is-a-directory": (cert, {**good, cert: str(tmp)}),
        "cert-not-pem": (cert, {**good, cert: str(not_pem)}),
        "cert-broken": (cert, {**good, cert: str(broken)}),
        "missing-key": (key, {**good, key: str(tmp / "nope.key")}),
        "key-not-pem": (key, {**good, key: str(not_pem)}),
        "key-of-another-cert": (key, {**good, key: str(pki["client"].key)}),
        "key-encrypted": (key, {**good, key: str(encrypted)}),
        "cert-without-key": (key, {cert: str(server.cert)}),
        "key-without-cert": (cert, {key: str(server.key)}),
        "client-ca-without-tls": (ca, {ca: str(pki["ca"].cert)}),
        "client-ca-not-pem": (ca, {**good, ca: str(not_pem)}),
        "client-ca-missing": (ca, {**good, ca: str(tmp / "nope-ca.crt")}),
    }


BAD = [
    "missing-cert", "cert-is-a-directory", "cert-not-pem", "cert-broken", "missing-key",
    "key-not-pem", "key-of-another-cert", "key-encrypted", "cert-without-key",
    "key-without-cert", "client-ca-without-tls", "client-ca-not-pem", "client-ca-missing",
]  # fmt: skip


@pytest.mark.parametrize("case", BAD)
def test_a_wrong_tls_file_is_a_config_error_naming_its_variable(
    case: str, pki: dict[str, Pair], tmp_path: Path
) -> None:
    variable, env = _bad_settings(pki, tmp_path)[case]
    with pytest.raises(ConfigError) as error:
        load_settings(env)
    message = str(error.value)
    assert message.startswith(variable) and "\n" not in message, message


@pytest.mark.parametrize("command", ["api", "projector"])
@pytest.mark.parametrize("case", ["cert-not-pem", "key-of-another-cert"])
def test_a_wrong_tls_file_stops_the_process_with_one_line(
    command: str, case: str, pki: dict[str, Pair], tmp_path: Path
) -> None:
    variable, env = _bad_settings(pki, tmp_path)[case]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    result = subprocess.run(
        [sys.executable, "-m", "metastore", command],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env, "METASTORE_DATABASE_URL": "postgresql://127.0.0.1:1/x"},
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"metastore: {variable}"), result.stderr


def test_the_settings_carry_the_files(pki: dict[str, Pair]) -> None:
    settings = load_settings(
        {
            "METASTORE_TLS_CERT_FILE": str(pki["server"].cert),
            "METASTORE_TLS_KEY_FILE": str(pki["server"].key),
            "METASTORE_TLS_CLIENT_CA_FILE": str(pki["ca"].cert),
        }
    )
    assert settings.tls is not None and settings.tls.client_ca_file == str(pki["ca"].cert)
    assert load_settings({}).tls is None


# --------------------------------------------------------------------------------------
# a renewed certificate is served without a restart


class SecretVolume:
    """A folder laid out as Kubernetes mounts a Secret: files that are symlinks through
    `..data`, itself a symlink swapped at once to a new version folder on each update."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.version = 0
        folder.mkdir()
        for name in ("tls.crt", "tls.key"):
            (folder / name).symlink_to(f"..data/{name}")

    def write(self, cert: Path, key: Path) -> None:
        self.version += 1
        version = self.folder / f"..v{self.version}"
        version.mkdir()
        (version / "tls.crt").write_bytes(cert.read_bytes())
        (version / "tls.key").write_bytes(key.read_bytes())
        (self.folder / "..data_tmp").symlink_to(version.name)
        os.replace(self.folder / "..data_tmp", self.folder / "..data")


def served_serial(base_url: str, ca: Pair) -> str:
    host, port = base_url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=str(ca.cert))
    with (
        socket.create_connection((host, int(port)), timeout=5) as sock,
        context.wrap_socket(sock, server_hostname=host) as tls,
    ):
        cert = tls.getpeercert()
        assert cert is not None
        return str(cert["serialNumber"])


def serial_of(pair: Pair) -> str:
    out = subprocess.run(
        ["openssl", "x509", "-in", str(pair.cert), "-noout", "-serial"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return out.strip().removeprefix("serial=").upper()


def test_a_renewed_certificate_is_served_without_a_restart(
    database_url: str, tmp_path: Path, pki: dict[str, Pair]
) -> None:
    renewed = issue(pki["ca"], tmp_path, "renewed")
    volume = SecretVolume(tmp_path / "tls")
    volume.write(pki["server"].cert, pki["server"].key)
    env = tls_env(
        pki,
        METASTORE_TLS_CERT_FILE=str(volume.folder / "tls.crt"),
        METASTORE_TLS_KEY_FILE=str(volume.folder / "tls.key"),
    )
    verify = trusting(pki["ca"])
    with (
        running("api", database_url, tmp_path, env=env, verify=verify) as api,
        running("projector", database_url, tmp_path, env=env, verify=verify) as projector,
    ):
        servers = (api, projector)
        for server in servers:
            assert served_serial(server.base_url, pki["ca"]) == serial_of(pki["server"])
        # Half renewed (the new certificate, the old key): the old pair is still served.
        volume.write(renewed.cert, pki["server"].key)
        time.sleep(RELOAD_CHECK_S + 1)
        for server in servers:
            assert served_serial(server.base_url, pki["ca"]) == serial_of(pki["server"])
            assert "renewed TLS certificate not loaded yet" in server.output()
        volume.write(renewed.cert, renewed.key)
        deadline = time.monotonic() + RELOAD_CHECK_S * 4
        for server in servers:
            while served_serial(server.base_url, pki["ca"]) != serial_of(renewed):
                assert time.monotonic() < deadline, f"{server.base_url} kept the old certificate"
                time.sleep(0.25)
            assert "TLS certificate reloaded" in server.output()
        # Served by the same processes, which go on answering over the renewed certificate.
        assert api.popen.poll() is None and projector.popen.poll() is None
        ready = httpx.get(api.base_url + "/readyz", verify=verify, timeout=5)
        assert ready.status_code == 200
