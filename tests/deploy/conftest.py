"""The chart tests' fixtures: `helm` (tests/deploy/helm.py finds or fetches it) and the chart
rendered with its default and its all-on values, once a session."""

from __future__ import annotations

import pytest

from tests.deploy.helm import ALL_ON, Manifest, helm_or_skip, template


@pytest.fixture(scope="session")
def helm() -> str:
    return helm_or_skip()


@pytest.fixture(scope="session")
def default_manifests(helm: str) -> list[Manifest]:
    return template(helm)


@pytest.fixture(scope="session")
def all_on_manifests(helm: str) -> list[Manifest]:
    return template(helm, values=ALL_ON)
