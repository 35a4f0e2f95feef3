"""The rendered chart, run: what Kubernetes would run, as local processes.

helm renders the chart; each container's ConfigMap and Secret volumes are written as files
at their mount paths (under a temporary folder: absolute mount paths, and the environment
values that name them, are rewritten into it), its environment is resolved from the rendered
Secrets (and the "cluster's" own, which the test makes), and its command runs against the
test PostgreSQL: the migration Job to completion, then the api and the projector. Their
rendered probes (path, port, scheme) must answer, and an event POSTed to the rendered API
port with the rendered ingest token must reach the read API. Once over plain HTTP with the
README's least-privilege roles, once with `tls.existingSecret` (certificates made here).
"""

from __future__ import annotations

import base64
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from metastore.embedded_pg import free_port
from tests.certs import issue, make_ca
from tests.conftest import Server
from tests.deploy.helm import Manifest, template
from tests.reliability.conftest import run_event
from tests.support import ReadmeInstall

METASTORE = Path(sys.executable).parent / "metastore"  # the image's entrypoint
EXISTING_SECRET = "metastore-cert"


class Cluster:
    """What the pods of one rendered release would find: its Secrets and ConfigMaps."""

    def __init__(self, manifests: list[Manifest], secrets: dict[str, dict[str, bytes]]) -> None:
        self.manifests = manifests
        self.secrets = dict(secrets)
        self.config_maps: dict[str, dict[str, bytes]] = {}
        for m in manifests:
            name = m["metadata"]["name"]
            if m["kind"] == "Secret":
                data = {k: base64.b64decode(v) for k, v in m.get("data", {}).items()}
                data |= {k: v.encode() for k, v in m.get("stringData", {}).items()}
                self.secrets[name] = data
            elif m["kind"] == "ConfigMap":
                self.config_maps[name] = {k: v.encode() for k, v in m.get("data", {}).items()}

    def workload(self, kind: str, suffix: str) -> Manifest:
        (found,) = [
            m
            for m in self.manifests
            if m["kind"] == kind and m["metadata"]["name"].endswith(suffix)
        ]
        return found


class Container:
    """One container of a pod template, as a local process under `root`."""

    def __init__(self, cluster: Cluster, workload: Manifest, root: Path) -> None:
        self.pod = workload["spec"]["template"]["spec"]
        (self.spec,) = self.pod["containers"]
        self.cluster = cluster
        self.root = root / workload["metadata"]["name"]
        self.mounts = sorted(
            (m["mountPath"] for m in self.spec.get("volumeMounts", [])), key=len, reverse=True
        )
        # A mount path where a path starts in a value (`/tmp` in `/tmp/x`, not in `/a/tmp/x`).
        alternatives = "|".join(re.escape(m.rstrip("/")) for m in self.mounts)
        self._mounted = re.compile(rf"(?<![\w./-])({alternatives})(?=/|$)")
        self._write_volumes()
        self.env = self._environment()
        self.log = self.root / "output.log"

    def local(self, path: str) -> str:
        """`path` inside the pod, as a path on this machine (mount paths moved under root)."""
        return self._mounted.sub(lambda m: str(self.root) + m.group(1), path)

    def _write_volumes(self) -> None:
        volumes = {v["name"]: v for v in self.pod.get("volumes", [])}
        for mount in self.spec.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            target = Path(self.local(mount["mountPath"]))
            target.mkdir(parents=True, exist_ok=True)
            if "emptyDir" in volume:
                continue
            if "secret" in volume:
                source = self.cluster.secrets[volume["secret"]["secretName"]]
                spec = volume["secret"]
            elif "configMap" in volume:
                source = self.cluster.config_maps[volume["configMap"]["name"]]
                spec = volume["configMap"]
            else:
                raise AssertionError(f"volume {mount['name']}: a kind this test cannot provide")
            items = spec.get("items") or [{"key": k, "path": k} for k in source]
            for item in items:
                (target / item["path"]).write_bytes(source[item["key"]])
                (target / item["path"]).chmod(item.get("mode", spec.get("defaultMode", 0o644)))

    def _environment(self) -> dict[str, str]:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.root), "LANG": "C.UTF-8"}
        for entry in self.spec.get("env", []):
            if "value" in entry:
                env[entry["name"]] = self.local(str(entry["value"]))
                continue
            ref = entry["valueFrom"]
            if "secretKeyRef" in ref:
                source = self.cluster.secrets[ref["secretKeyRef"]["name"]]
                env[entry["name"]] = source[ref["secretKeyRef"]["key"]].decode()
            else:
                raise AssertionError(f"env {entry['name']}: {ref} is not provided by this test")
        return env

    def command(self) -> list[str]:
        argv = [*self.spec["command"], *self.spec.get("args", [])]
        assert argv[0] == "metastore"
        return [str(METASTORE), *argv[1:]]

    def run(self, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(), env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def start(self) -> subprocess.Popen[bytes]:
        with self.log.open("wb") as out:
            return subprocess.Popen(
                self.command(), env=self.env, stdout=out, stderr=subprocess.STDOUT
            )

    def probe_url(self, probe: str) -> tuple[str, float]:
        """The URL a probe GETs (its named port resolved), and its timeout."""
        http = self.spec[probe]["httpGet"]
        ports = {p["name"]: p["containerPort"] for p in self.spec["ports"]}
        port = ports[http["port"]] if isinstance(http["port"], str) else http["port"]
        url = f"{http['scheme'].lower()}://127.0.0.1:{port}{http['path']}"
        return url, float(self.spec[probe]["timeoutSeconds"])


def wait_probes(container: Container, process: subprocess.Popen[bytes], verify: Any) -> None:
    """Both probes answer 200, each within its rendered timeout."""
    deadline = time.monotonic() + 30
    for probe in ("readinessProbe", "livenessProbe"):
        url, timeout = container.probe_url(probe)
        while True:
            assert process.poll() is None, container.log.read_text()
            try:
                if httpx.get(url, timeout=timeout, verify=verify).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{url}:\n{container.log.read_text()[-3000:]}"
            time.sleep(0.1)


def first_token(cluster: Cluster, scope: str) -> str:
    (tokens,) = [s for n, s in cluster.secrets.items() if n.endswith("-tokens")]
    return tokens[scope].decode().splitlines()[0]


def run_release(
    helm: str,
    tmp_path: Path,
    values: list[str],
    secrets: dict[str, dict[str, bytes]],
    verify: Any = True,
    policy: bool = False,
) -> None:
    """`policy`: the values hold an `authorization.policy` letting the ingest token write
    only the namespaces of `run_event`."""
    api_port, projector_port = free_port(), free_port()
    args = [*values, "--set", f"api.port={api_port}", "--set", f"projector.port={projector_port}"]
    cluster = Cluster(template(helm, *args), secrets)
    mounted = [m["kind"] for m in cluster.manifests if m["kind"] in ("Secret", "ConfigMap")]
    job = Container(cluster, cluster.workload("Job", "-migrate"), tmp_path)
    migrated = job.run()
    assert migrated.returncode == 0, migrated.stderr
    api = Container(cluster, cluster.workload("Deployment", "-api"), tmp_path)
    projector = Container(cluster, cluster.workload("Deployment", "-projector"), tmp_path)
    if "ConfigMap" in mounted:  # the projector reads the map from where it was written
        catalogs = Path(projector.env["METASTORE_CATALOGS_FILE"])
        assert catalogs.is_relative_to(tmp_path) and "lakehouse" in catalogs.read_text()
    processes = [(api, api.start()), (projector, projector.start())]
    try:
        for container, process in processes:
            wait_probes(container, process, verify)
        base = api.probe_url("readinessProbe")[0].rsplit("/", 1)[0]
        job_name = f"chart-{uuid.uuid4().hex[:8]}"
        with httpx.Client(base_url=base, verify=verify, timeout=30) as http:
            ingest = {"Authorization": f"Bearer {first_token(cluster, 'ingest')}"}
            read = {"Authorization": f"Bearer {first_token(cluster, 'read')}"}
            posted = http.post("/ingest/openlineage", json=run_event(job=job_name), headers=ingest)
            assert posted.status_code == 200, posted.text
            if policy:  # the rendered policy file decides
                assert "METASTORE_POLICY_FILE" in api.env
                elsewhere = run_event(job=job_name) | {"job": {"namespace": "x", "name": "y"}}
                refused = http.post("/ingest/openlineage", json=elsewhere, headers=ingest)
                assert refused.status_code == 403, refused.text
            deadline = time.monotonic() + 20
            while True:
                answer = http.get("/api/v1/jobs", params={"q": job_name}, headers=read)
                # 503 until the projector's first start has made the read models
                assert answer.status_code in (200, 503), answer.text
                if answer.status_code == 200 and [j["name"] for j in answer.json()["items"]] == [
                    job_name
                ]:
                    break
                assert time.monotonic() < deadline, projector.log.read_text()[-3000:]
                time.sleep(0.1)
            assert http.get("/api/v1/status", headers=read).status_code == 200
    finally:
        for _, process in processes:
            process.terminate()
        for container, process in processes:
            try:
                # uvicorn ends by re-raising the SIGTERM it handled
                status = process.wait(timeout=20)
                assert status in (0, -signal.SIGTERM), container.log.read_text()[-3000:]
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()


def database_values(url_host: str, port: int, name: str, user: str) -> list[str]:
    return [
        "--set", f"database.host={url_host}",
        "--set", f"database.port={port}",
        "--set", f"database.name={name}",
        "--set", f"database.user={user}",
        "--set", "database.sslmode=disable",
        # The chart keeps it in its Secrets (and the hook's copy); the test server trusts
        # local connections, so it only has to reach PGPASSWORD.
        "--set", "database.password=not-checked-by-the-test-server",
        "--set", "config.logFormat=text",
    ]  # fmt: skip


def test_the_rendered_chart_runs_with_least_privilege_roles(
    helm: str, readme_install: ReadmeInstall, tmp_path: Path
) -> None:
    readme_install.run_sql()
    server = readme_install.pg_server
    values = [
        *database_values(server.host, server.port, readme_install.database, readme_install.owner),
        "--set", f"database.api.user={readme_install.api}",
        "--set", f"database.projector.user={readme_install.projector}",
    ]  # fmt: skip
    run_release(helm, tmp_path, values, secrets={})


def test_the_rendered_chart_runs_with_tls_from_an_existing_secret(
    helm: str, pg_server: Server, tmp_path: Path
) -> None:
    ca = make_ca(tmp_path / "pki")
    server = issue(ca, tmp_path / "pki", "metastore")
    secret = {"tls.crt": server.cert.read_bytes(), "tls.key": server.key.read_bytes()}
    verify = ssl.create_default_context(cafile=str(ca.cert))
    with pg_server.database("chart") as url:
        name = url.rsplit("/", 1)[1].split("?")[0]
        values = [
            *database_values(pg_server.host, pg_server.port, name, pg_server.user),
            "--set", f"tls.existingSecret={EXISTING_SECRET}",
            # a ConfigMap mounted into the projector (METASTORE_CATALOGS_FILE names it)
            "--set", "catalogs[0].engine=trino://trino-coordinator:8443",
            "--set", "catalogs[0].catalog=lakehouse",
            "--set", "catalogs[0].metastore=hive://hive-metastore:9083",
            # the policy, a ConfigMap mounted into the api (METASTORE_POLICY_FILE): the
            # chart's tokens are the principals <scope>-token
            "--set-json", 'authorization.policy={"write": [{"subjects": ["ingest-token"], '
            '"namespaces": ["reliability", "s3://*"]}], "read": [{"subjects": ["read-token"], '
            '"namespaces": ["*"]}]}',
        ]  # fmt: skip
        run_release(helm, tmp_path, values, {EXISTING_SECRET: secret}, verify=verify, policy=True)
