"""The `helm` fixture of the chart tests (tests/deploy/helm.py finds or fetches helm)."""

from __future__ import annotations

import os

import pytest

from tests.deploy.helm import find_helm


@pytest.fixture(scope="session")
def helm() -> str:
    path = find_helm()
    if path is None:
        message = "helm not available (set METASTORE_HELM or run scripts/fetch-helm.sh)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
