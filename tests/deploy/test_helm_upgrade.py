"""`helm upgrade --reuse-values` from the previous charts, as the README tells an operator.

A release of an earlier chart (its templates and values, from git) is installed into
helm's memory driver (`--dry-run=client -o yaml` gives the release record helm stores),
then the chart of this checkout is upgraded over it with the real helm. With
`--reuse-values` helm renders the new templates with the old release's values (the old
chart's defaults, not this chart's), so every value the templates read must have a
default in the template. helm asks a cluster for its version even in a client dry run:
a stub answering the discovery requests stands in for it.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from metastore import __version__
from metastore.config import load_settings
from tests.deploy.helm import CHART, NAMESPACE, RELEASE, ROOT, Manifest
from tests.json_handler import JsonHandler
from tests.support import skip_or_fail_in_ci

# The charts released before this one: chart version -> its commit.
PREVIOUS_CHARTS = {"0.1.0": "5b622b4", "0.2.0": "3ee2586", "0.3.0": "a2a89f8"}
CHART_PATH = "deploy/helm/metastore"
# What helm's discovery asks a cluster (the version; no API groups beyond v1).
DISCOVERY = {
    "/version": {"major": "1", "minor": "30", "gitVersion": "v1.30.0"},
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
}


class Discovery(JsonHandler):
    def do_GET(self) -> None:
        body = DISCOVERY.get(self.path.split("?")[0])
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_json(body)


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Discovery)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path_factory.mktemp("kube") / "config"
    cluster = {"server": f"http://127.0.0.1:{server.server_port}"}
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "stub", "cluster": cluster}],
                "contexts": [{"name": "stub", "context": {"cluster": "stub"}}],
                "current-context": "stub",
                "users": [{"name": "stub", "user": {}}],
            }
        )
    )
    try:
        yield config
    finally:
        server.shutdown()
        server.server_close()


def previous_chart(commit: str, into: Path) -> Path:
    """The chart as it was at `commit` (git archive of the checkout's history)."""
    archive = subprocess.run(
        ["git", "archive", commit, CHART_PATH], cwd=ROOT, capture_output=True, check=False
    )
    if archive.returncode != 0:
        message = f"the history lacks {commit}: {archive.stderr.decode().strip()}"
        skip_or_fail_in_ci(message)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / CHART_PATH


def helm_env(kubeconfig: Path, releases: Path | None = None) -> dict[str, str]:
    env = {"KUBECONFIG": str(kubeconfig), "HELM_DRIVER": "memory"}
    if releases is not None:
        env["HELM_MEMORY_DRIVER_DATA"] = str(releases)
    return env


def helm_with(binary: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def installed_release(
    binary: str,
    kubeconfig: Path,
    chart: Path,
    values: Path | None,
    into: Path,
    name: str = RELEASE,
    namespace: str = NAMESPACE,
) -> Path:
    """The release record helm stores after installing `chart` (with `values`), as the
    memory driver reads it."""
    empty = into / "none.yaml"
    empty.write_text("")
    args = ["install", name, str(chart), "-n", namespace, "--dry-run=client", "-o", "yaml"]
    if values is not None:
        args += ["-f", str(values)]
    done = helm_with(binary, helm_env(kubeconfig, empty), *args)
    assert done.returncode == 0, done.stderr
    release = yaml.safe_load(done.stdout)
    release["info"]["status"] = "deployed"
    path = into / "releases.yaml"
    path.write_text(yaml.safe_dump([release]))
    return path


def upgraded_manifests(binary: str, kubeconfig: Path, releases: Path, flag: str) -> list[Manifest]:
    args = ["upgrade", RELEASE, str(CHART), "-n", NAMESPACE, flag, "--dry-run=client"]
    done = helm_with(binary, helm_env(kubeconfig, releases), *args, "-o", "yaml")
    assert done.returncode == 0, done.stderr
    release = yaml.safe_load(done.stdout)
    assert release["info"]["notes"]  # (NOTES.txt rendered too)
    texts = [release["manifest"], *(hook["manifest"] for hook in release.get("hooks") or [])]
    return [m for text in texts for m in yaml.safe_load_all(text) if m]


def containers(manifests: list[Manifest]) -> Iterator[tuple[str, Manifest]]:
    for m in manifests:
        if m["kind"] in ("Deployment", "Job"):
            for c in m["spec"]["template"]["spec"]["containers"]:
                yield f"{m['metadata']['name']}/{c['name']}", c


@pytest.mark.parametrize("flag", ["--reuse-values", "--reset-then-reuse-values"])
@pytest.mark.parametrize("values", ["defaults", "all-on"])
@pytest.mark.parametrize("chart_version", sorted(PREVIOUS_CHARTS))
def test_upgrade_from_a_previous_chart_renders_and_the_processes_take_its_env(
    helm: str, kubeconfig: Path, tmp_path: Path, chart_version: str, values: str, flag: str
) -> None:
    old = previous_chart(PREVIOUS_CHARTS[chart_version], tmp_path)
    user_values = old / "ci" / "all-on-values.yaml" if values == "all-on" else None
    if user_values is not None:
        # (the CI values pin an image: an upgrade would keep it, as an operator's would)
        settings = yaml.safe_load(user_values.read_text())
        for pinned in ("tag", "digest"):
            settings["image"].pop(pinned, None)
        user_values = tmp_path / "user-values.yaml"
        user_values.write_text(yaml.safe_dump(settings))
    releases = installed_release(helm, kubeconfig, old, user_values, tmp_path)
    manifests = upgraded_manifests(helm, kubeconfig, releases, flag)
    seen = 0
    for name, container in containers(manifests):
        # Each release's image has its own tag: the upgrade moves the pods to this one's.
        assert container["image"].endswith(f":{__version__}"), name
        plain = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
        empty = sorted(n for n, v in plain.items() if v in ("", None))
        assert not empty, f"{name} renders empty: {empty}"
        # The process starts with that environment (files and secrets aside).
        checked = {k: v for k, v in plain.items() if not k.endswith("_FILE")}
        settings = load_settings({**checked, "METASTORE_AUTH": "disabled"})
        assert settings.read_timeout > 0
        seen += 1
    assert seen == 3  # api, projector, migrate


def readme_helm_commands(section: str) -> list[list[str]]:
    """The `helm ...` commands of the README's section, as written (comments dropped)."""
    readme = (ROOT / "README.md").read_text()
    text = readme.split(f"### {section}\n", 1)[1].split("\n### ", 1)[0]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("helm "):
                commands.append(shlex.split(line, comments=True))
    return commands


def test_the_readmes_upgrade_and_rollback_commands_as_written(
    helm: str, kubeconfig: Path, tmp_path: Path
) -> None:
    """From chart 0.2.0 (issue 43's): the README's upgrade, then its history and rollback."""
    old = previous_chart(PREVIOUS_CHARTS["0.2.0"], tmp_path)
    releases = installed_release(helm, kubeconfig, old, None, tmp_path, "metastore", "lineage")
    upgrade, history, rollback = readme_helm_commands("7. Upgrade")
    assert upgrade[:2] == ["helm", "upgrade"] and "--reuse-values" in upgrade
    env = helm_env(kubeconfig, releases)
    done = helm_with(helm, env, *upgrade[1:], "--dry-run=client", "-o", "yaml")
    assert done.returncode == 0, done.stderr
    upgraded = yaml.safe_load(done.stdout)
    assert upgraded["chart"]["metadata"]["appVersion"] == __version__
    # The memory driver now holds both revisions, as the cluster would.
    (first,) = yaml.safe_load(releases.read_text())
    first["info"]["status"] = "superseded"
    upgraded["info"]["status"] = "deployed"
    releases.write_text(yaml.safe_dump([first, upgraded]))
    assert history[-2:] == ["history", "metastore"]
    done = helm_with(helm, env, *history[1:], "-o", "json")
    assert done.returncode == 0, done.stderr
    revisions = {r["revision"]: r["app_version"] for r in json.loads(done.stdout)}
    assert revisions == {1: first["chart"]["metadata"]["appVersion"], 2: __version__}
    assert revisions[1] != revisions[2]  # each release's image has a tag of its own
    assert rollback[-1] == "<REVISION>"
    done = helm_with(helm, env, *rollback[1:-1], "1", "--dry-run=client")
    assert done.returncode == 0, done.stderr
    assert "Rollback was a success" in done.stdout
