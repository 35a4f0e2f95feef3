"""Upgrades and rollbacks serve every read: through the real `metastore api` and
`metastore projector` processes, on a store whose read models are another release's.

Another release's read models are made as that release's projector leaves them: other
versions in `projection_state`, and tables without a column this release reads (the
columns issue 43 found missing after an upgrade from chart 0.2.0). Meanwhile every read
answers 200 or 503 `read-models-rebuilding` with Retry-After, never 500; once this
release's projector has rebuilt and swapped in its tables, every read answers as before.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore import __version__
from metastore.api.readmodels import RETRY_AFTER_S
from metastore.problems import PROBLEM_BASE, PROBLEM_JSON
from tests.support import (
    DBT_PRODUCER,
    ROOT,
    all_scenario_events,
    folded_scenarios,
    run_event,
    running,
    skip_or_fail_in_ci,
)

REBUILDING = PROBLEM_BASE + "read-models-rebuilding"
# The reads issue 43 saw fail (500) during an upgrade, and the other lists.
READS = (
    "/api/v1/namespaces",
    "/api/v1/datasets",
    "/api/v1/datasets/{dataset}",
    "/api/v1/lineage?node=dataset:{dataset}",
    "/api/v1/impact?node=dataset:{dataset}",
    "/api/v1/jobs",
    "/api/v1/runs",
    "/api/v1/search?q=orders",
)
# What the previous release's projector left (its versions, its tables' columns).
PREVIOUS_RELEASE = (
    "UPDATE projection_state SET version = version - 1 WHERE name IN ('datasets', 'lineage')",
    # (the 500 was d.home_namespace, which no read uses now: a column every dataset
    # read uses stands for it)
    "ALTER TABLE readmodel.dataset_names RENAME COLUMN dataset_id TO dataset",
    "ALTER TABLE readmodel.job_edges DROP COLUMN last_write_at CASCADE",
)
# What a newer release's swap leaves: a column of this release's gone, then its versions.
NEWER_LAYOUT = PREVIOUS_RELEASE[1:]
NEWER_VERSIONS = (
    "UPDATE projection_state SET version = version + 1 WHERE name IN ('datasets', 'lineage')",
)


# The previous release (0.1.0, chart 0.3.0): its code folds a store as it would have.
PREVIOUS_RELEASE_COMMIT = "a2a89f8"
PREVIOUS_RELEASE_PATHS = (
    "metastore",
    "projections",
    "sql",
    "tests/__init__.py",
    "tests/logdata.py",
)
# Run with the previous release's code (its working directory first on sys.path).
PREVIOUS_FOLD = """
import sys
import psycopg
from projections.runner import catch_up
from projections.schema import create_readmodel_tables
with psycopg.connect(sys.argv[1]) as conn:
    create_readmodel_tables(conn)
catch_up(sys.argv[1])
"""
# The previous release's own append (this release's reads the log's order offset, a table
# the previous release's schema lacks), of the events on stdin.
PREVIOUS_APPEND = """
import json
import sys
import psycopg
from tests.logdata import append
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    append(conn, json.load(sys.stdin))
"""


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's code and SQL (git archive of the checkout's history)."""
    archive = subprocess.run(
        ["git", "archive", PREVIOUS_RELEASE_COMMIT, *PREVIOUS_RELEASE_PATHS],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        message = f"the history lacks {PREVIOUS_RELEASE_COMMIT}: {archive.stderr.decode()}"
        skip_or_fail_in_ci(message)
    root = tmp_path_factory.mktemp("previous-release")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(root, filter="data")
    return root


def release_process(
    code: Path, url: str, args: list[str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`python <args>` with the code of the checkout `code` (first on sys.path)."""
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        cwd=code,
        env={**os.environ, "METASTORE_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def store(pg_server: Any, template_db: str) -> Iterator[str]:
    """A store with the conformance scenarios folded by this release."""
    with folded_scenarios(pg_server, template_db, "upgrade") as url:
        yield url


def read_paths(client: httpx.Client) -> list[str]:
    datasets = client.get("/api/v1/datasets").json()["items"]
    dataset = datasets[0]["id"]
    return [path.format(dataset=dataset) for path in READS]


def answers(client: httpx.Client, paths: list[str]) -> dict[str, httpx.Response]:
    return {path: client.get(path) for path in paths}


def change(url: str, statements: tuple[str, ...]) -> None:
    with psycopg.connect(url) as conn, conn.transaction():  # as a swap does: at once
        for statement in statements:
            conn.execute(statement)


def assert_rebuilding(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == PROBLEM_JSON
    assert answer.headers["retry-after"] == RETRY_AFTER_S
    assert answer.json()["type"] == REBUILDING, answer.text


def reads_until_swapped(
    client: httpx.Client, paths: list[str], timeout: float = 60
) -> dict[str, httpx.Response]:
    """Reads every path until all answer 200 (a 503 must be `read-models-rebuilding`, any
    other status fails); returns the last answers."""
    deadline = time.monotonic() + timeout
    while True:
        last = answers(client, paths)
        for answer in last.values():
            if answer.status_code == 503:
                assert_rebuilding(answer)
            else:
                assert answer.status_code == 200, answer.text
        if all(a.status_code == 200 for a in last.values()):
            return last
        assert time.monotonic() < deadline, "the rebuild was never swapped in"
        time.sleep(0.05)


def test_a_store_the_previous_release_folded_serves_every_read_through_the_upgrade(
    previous_release: Path, store: str, pg_server: Any, tmp_path: Path
) -> None:
    """Issue 43's upgrade: the previous release's code migrated and folded the store; this
    release's migrate, api and projector take it over."""
    with running("api", store, tmp_path) as api, httpx.Client(base_url=api.base_url) as client:
        paths = read_paths(client)
        expected = answers(client, paths)  # (this release's fold of the same events)
    with pg_server.database("previous") as url:
        # The previous release's migrate, the events, then its projector's fold of them.
        done = release_process(previous_release, url, ["-m", "metastore", "migrate"])
        assert done.returncode == 0, done.stderr
        events = json.dumps(all_scenario_events())
        done = release_process(previous_release, url, ["-c", PREVIOUS_APPEND, url], events)
        assert done.returncode == 0, done.stderr
        done = release_process(previous_release, url, ["-c", PREVIOUS_FOLD, url])
        assert done.returncode == 0, done.stderr
        # This release's migrate (the helm hook), api pods, then projector.
        done = release_process(ROOT, url, ["-m", "metastore", "migrate"])
        assert done.returncode == 0, done.stderr
        with (
            running("api", url, tmp_path) as api,
            httpx.Client(base_url=api.base_url) as client,
        ):
            for answer in answers(client, paths).values():
                assert_rebuilding(answer)
            assert client.get("/api/v1/status").json()["rebuilding"]
            with running("projector", url, tmp_path):
                after = reads_until_swapped(client, paths)
    for path in paths:
        assert after[path].json() == expected[path].json(), path


def test_the_previous_releases_read_models_answer_503_until_this_releases_are_swapped_in(
    store: str, tmp_path: Path
) -> None:
    with running("api", store, tmp_path) as api, httpx.Client(base_url=api.base_url) as client:
        paths = read_paths(client)
        before = answers(client, paths)
    assert all(a.status_code == 200 for a in before.values()), before
    change(store, PREVIOUS_RELEASE)
    # This release's API pods start while the tables are still the previous release's.
    with running("api", store, tmp_path) as api, httpx.Client(base_url=api.base_url) as client:
        for answer in answers(client, paths).values():
            assert_rebuilding(answer)
        status = client.get("/api/v1/status")
        assert status.status_code == 200
        assert status.json()["version"] == __version__
        assert status.json()["rebuilding"] == ["datasets", "lineage"]
        # This release's projector rebuilds them beside the live tables and swaps them in.
        with running("projector", store, tmp_path):
            after = reads_until_swapped(client, paths)
        assert client.get("/api/v1/status").json()["rebuilding"] == []
    for path in paths:
        assert after[path].json() == before[path].json(), path


def test_ingest_export_and_probes_go_on_while_reads_wait_for_the_rebuild(
    store: str, tmp_path: Path
) -> None:
    """An event acknowledged during the rebuild is kept and folded into the tables swapped
    in; the export feed and /readyz answer meanwhile."""
    run = "0193a1f0-0000-7000-8000-0000000000a1"
    event = run_event(
        "COMPLETE", "2026-12-01T10:00:00Z", DBT_PRODUCER, ("upgrade", "during"), run, [], []
    )
    change(store, PREVIOUS_RELEASE)
    with running("api", store, tmp_path) as api, httpx.Client(base_url=api.base_url) as client:
        assert_rebuilding(client.get("/api/v1/jobs"))
        assert client.post("/ingest/openlineage", json=event).status_code == 200
        assert client.get("/readyz").status_code == 200
        exported = client.get("/export/openlineage/events")
        assert exported.status_code == 200 and run in exported.text
        with running("projector", store, tmp_path):
            reads_until_swapped(client, ["/api/v1/jobs"])
            deadline = time.monotonic() + 30
            while (answer := client.get(f"/api/v1/runs/{run}")).status_code == 404:
                assert time.monotonic() < deadline, "the event was never folded"
                time.sleep(0.05)
            assert answer.status_code == 200, answer.text


def test_a_newer_releases_read_models_answer_503_until_this_releases_are_back(
    store: str, tmp_path: Path
) -> None:
    """A rollback: a newer release's projector swapped its tables in under this release's
    API, which then reads them; this release's projector rebuilds its own."""
    with running("api", store, tmp_path) as api, httpx.Client(base_url=api.base_url) as client:
        paths = read_paths(client)
        before = answers(client, paths)
        assert all(a.status_code == 200 for a in before.values()), before
        # The swap, seen by an API that read the versions a moment ago: a query meeting a
        # layout it does not read is the 503 too, not a 500.
        change(store, NEWER_LAYOUT)
        met = answers(client, paths)
        for answer in met.values():
            if answer.status_code != 200:
                assert_rebuilding(answer)
        # (the namespaces and a dataset read the columns dropped)
        assert met[paths[0]].status_code == met[paths[2]].status_code == 503
        change(store, NEWER_VERSIONS)
        for answer in answers(client, paths).values():
            assert_rebuilding(answer)
        with running("projector", store, tmp_path):
            after = reads_until_swapped(client, paths)
    for path in paths:
        assert after[path].json() == before[path].json(), path


def test_every_process_reports_its_release(store: str, tmp_path: Path) -> None:
    build_info = f'metastore_build_info{{version="{__version__}"}} 1.0'
    with running("api", store, tmp_path) as api, running("projector", store, tmp_path) as proj:
        for process in (api, proj):
            metrics = httpx.get(process.base_url + "/metrics")
            assert build_info in metrics.text.splitlines()
        assert httpx.get(api.base_url + "/api/v1/status").json()["version"] == __version__
    for process, line in ((api, "api starting"), (proj, "projector listening")):
        (started,) = [out for out in process.output().splitlines() if line in out]
        assert f"version={__version__}" in started, started
    done = release_process(ROOT, store, ["-m", "metastore", "--version"])
    assert done.stdout == f"metastore {__version__}\n"


def test_the_image_and_the_chart_carry_the_packages_version() -> None:
    """Each release's image gets a tag of its own: the chart's appVersion (the default tag)
    and the image's version label are the package's version."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    chart = (ROOT / "deploy" / "helm" / "metastore" / "Chart.yaml").read_text()
    containerfile = (ROOT / "Containerfile").read_text()
    app_version = re.search(r'^appVersion: "([^"]+)"$', chart, re.M)
    image_version = re.search(r"^ARG VERSION=(\S+)$", containerfile, re.M)
    assert project["version"] == __version__
    assert app_version is not None and app_version[1] == __version__
    assert image_version is not None and image_version[1] == __version__


def test_an_empty_variable_means_its_default(store: str, tmp_path: Path) -> None:
    """A chart rendering a value an older values file lacks sets its variable to '': the
    processes start with the default rather than exiting on it."""
    empty = {name: "" for name in ("METASTORE_READ_TIMEOUT", "METASTORE_POOL_SIZE")}
    with running("api", store, tmp_path, env=empty) as api:
        assert httpx.get(api.base_url + "/api/v1/jobs").status_code == 200
    with running("projector", store, tmp_path, env={"METASTORE_STALL_TIMEOUT": ""}) as proj:
        assert httpx.get(proj.base_url + "/readyz").status_code == 200
