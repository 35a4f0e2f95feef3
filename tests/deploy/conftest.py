"""The `helm` fixture of the chart tests (tests/deploy/helm.py finds or fetches helm)."""

from __future__ import annotations

import pytest

from tests.deploy.helm import helm_or_skip


@pytest.fixture(scope="session")
def helm() -> str:
    return helm_or_skip()
