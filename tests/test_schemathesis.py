"""schemathesis, all checks, positive and negative, against a real `metastore api` loaded
with the conformance scenarios (folded by the real projector): it must find nothing.

Runs over the read API (`/api/v1`, with POST /api/v1/lineage, ingest at the clients'
default path, which answers the read token 403). The ingest and export operations are
fuzzed with the read token too, so all they answer is 403 (documented on every operation)
or 405: with an ingest token their request body, described as an outline (not the whole
OpenLineage schema), would be refused as positive data, and export's long poll (`wait` up
to 60 s) outlasts a fuzzer's request timeout; their own suites test them.

One worker: with two, CPython 3.11's ast module (which hypothesis uses to describe its
strategies) is not thread-safe and fails now and then with "AST constructor recursion
depth mismatch" (gh-106905).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver import scenario_api

ROOT = Path(__file__).resolve().parent.parent
HOOKS = ROOT / "tests" / "schemathesis_hooks.py"
TOKEN = "schemathesis-read-token"
MAX_EXAMPLES = 25


@pytest.fixture(scope="module")
def api(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    env = {"METASTORE_AUTH": "enabled", "METASTORE_READ_TOKENS": TOKEN}
    with scenario_api(pg_server, template_db, tmp_path_factory.mktemp("st"), env=env) as (url, _):
        yield url


@pytest.mark.parametrize(
    "paths", ["^/api/v1/", "^/(ingest|export)/"], ids=["read-api", "ingest-and-export"]
)
def test_schemathesis_finds_nothing(api: str, tmp_path: Path, paths: str) -> None:
    st = Path(sys.executable).with_name("st")
    result = subprocess.run(
        [
            str(st),
            "run",
            f"{api}/api/v1/openapi.json",
            "--url",
            api,
            "--checks",
            "all",
            "--mode",
            "all",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            "20260902",
            "--include-path-regex",
            paths,
            "-H",
            f"Authorization: Bearer {TOKEN}",
            "--phases",
            "examples,coverage,fuzzing",
            "--workers",
            "1",
            "--no-color",
            "--generation-database",
            "none",
            "--request-timeout",
            "10",
            "--warnings",
            "off",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS), "PYTHONPATH": str(ROOT)},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "No issues found" in output or "passed" in output, output
