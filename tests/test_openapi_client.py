"""A TypeScript client on types generated from the OpenAPI document, as Cockpit builds one.

openapi-typescript turns metastore/openapi.json into types; `tsc --strict` (with
noUncheckedIndexedAccess and exactOptionalPropertyTypes) type-checks
tools/openapi/client/screens.ts, which draws Cockpit's screens ("what broke" and "what
changed" among them), reads a facet's field and a schema field's type, tells problems
apart by their `type` in an exhaustive switch, all without a cast; then node runs the
compiled client against a server loaded with the conformance scenarios and the brief's
example after a failed Trino run, and the screens must take the calls they promise. The
node tools are the pinned ones of tools/openapi (package-lock.json, installed with `npm
ci` by `make openapi-tools`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiserver import scenario_api
from tests.support import FAILED_TRINO_RUN, TRINO, all_scenario_events, failed_trino_events
from tests.test_api_screens import extra_events

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools" / "openapi"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="node and npm are needed to generate and type-check the TypeScript client",
)


def run(*command: str, cwd: Path = TOOLS, timeout: float = 600) -> str:
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def compiled() -> Path:
    run("make", "openapi-tools", cwd=ROOT)
    run(
        "npx",
        "--no-install",
        "openapi-typescript",
        "../../metastore/openapi.json",
        "-o",
        "build/schema.d.ts",
    )
    types = (TOOLS / "build" / "schema.d.ts").read_text()
    members = [line for line in types.splitlines() if not line.startswith("export type")]
    assert not [line for line in members if "Record<string, never>" in line]  # facets too
    assert "unknown[]" not in types  # schema fields and transformations are typed
    run("npx", "--no-install", "tsc", "-p", "tsconfig.json", "--strict")
    lines = (TOOLS / "client" / "screens.ts").read_text().splitlines()
    code = "\n".join(line for line in lines if not line.strip().startswith("//"))
    assert not re.search(r"\bas\s+[A-Za-z_{\[(]", code)  # no casts
    return TOOLS / "build" / "js" / "client" / "screens.js"


def test_generated_types_check_and_the_client_draws_each_screen_in_its_calls(
    compiled: Path, pg_server: Any, template_db: str, tmp_path: Path
) -> None:
    events = all_scenario_events() + extra_events() + failed_trino_events()
    with scenario_api(pg_server, template_db, tmp_path, events) as (url, _):
        base = url + "/api/v1"

        def lookup(namespace: str, name: str) -> str:
            page = httpx.get(base + "/datasets", params={"namespace": namespace, "name": name})
            return page.json()["items"][0]["id"]  # type: ignore[no-any-return]

        raw = lookup("s3a://warehouse", "raw.db/orders")
        tbl1 = lookup("file", "/tmp/cll_test/tbl1")
        summary = lookup(TRINO, "lakehouse.sales.orders_summary")
        test_csv = lookup("gs://mock-bucket", "test.csv")
        jobs = httpx.get(base + "/jobs", params={"namespace": "airflow", "limit": 500}).json()
        bq = next(j["id"] for j in jobs["items"] if j["name"] == "BQ")
        as_of = "2026-09-02T10:01:00Z"
        out = run(
            "node",
            str(compiled),
            base,
            f"dataset:{raw}",
            tbl1,
            as_of,
            bq,
            f"dataset:{test_csv}",
            FAILED_TRINO_RUN,
            f"dataset:{summary}",
            "2026-09-02T12:00:00Z",
            "2026-09-04T00:00:00Z",
            TRINO,  # the datasets list of the failed Trino run's namespace
        )
    screens = json.loads(out)
    assert {name: s["calls"] for name, s in screens.items()} == {
        "namespaces": 1,
        "failures": 1,
        "graph": 1,
        "graphAsOf": 1,
        "graphEdge": 1,
        "datasetList": 1,
        "dataset": 2,
        "job": 2,
        "search": 1,
        "problem": 1,
        "whatBroke": 1,
        "whatChanged": 1,
    }
    broke = screens["whatBroke"]["view"]
    assert broke["run"] == "FAIL" and broke["truncated"] is False
    assert broke["datasets"] == [
        "lakehouse.sales.orders_summary [team:sales-analytics]: written "
        "2026-09-02T10:15:03.870000Z by 20260902_101500_00042_ab3kd, FAIL at "
        "2026-09-03T10:15:41.002000Z (stale: writer failed)",
        "lakehouse.marts.revenue_by_region [team:finance]: written 2026-09-02T11:02:30Z by "
        "analytics.revenue_by_region (stale: 20260903_101500_00051_cm7qz failed upstream, via "
        "lakehouse.sales.orders_summary)",
    ]
    assert broke["jobs"] == [
        "20260903_101500_00051_cm7qz: red",
        "analytics.revenue_by_region: green",
    ]
    listed = {r["name"]: r for r in screens["datasetList"]["view"]["rows"]}
    assert listed["lakehouse.sales.orders_summary"] == {  # the failed run's output
        "name": "lakehouse.sales.orders_summary",
        "colour": "amber",
        "freshness": "written 2026-09-02T10:15:03.870000Z by 20260902_101500_00042_ab3kd, "
        "FAIL at 2026-09-03T10:15:41.002000Z (stale: writer failed)",
    }
    assert listed["lakehouse.marts.revenue_by_region"]["colour"] == "amber"  # built from it
    changed = screens["whatChanged"]["view"]
    # each edge drawn from the edge alone: both ends named, and the state of its run
    assert changed.pop("edgeLabels") == [
        "dataset lakehouse.sales.orders_daily -> job 20260903_101500_00051_cm7qz (FAIL)",
        "job 20260903_101500_00051_cm7qz -> dataset lakehouse.sales.orders_summary (FAIL)",
    ]
    assert changed == {
        "added": ["job 20260903_101500_00051_cm7qz"],
        "removed": [],
        "edgesAdded": 2,
        "edgesRemoved": 0,
        "schema": [],
    }
    rows = {r["name"]: r for r in screens["namespaces"]["view"]["rows"]}
    # (s3a://warehouse: its 4 datasets and orders_daily, shown under its Hive name)
    assert rows["airflow"]["jobs"] == 16 and rows["s3a://warehouse"]["datasets"] == 5
    failures = screens["failures"]["view"]
    assert failures == {
        "count": "3",
        "rows": [
            "20260903_101500_00051_cm7qz FAIL",  # the brief's example's failed Trino run
            "cockpit.failing FAIL",
            "cockpit.aborted ABORT",
        ],
    }
    nodes = {n["label"]: n["colour"] for n in screens["graph"]["view"]["nodes"]}
    assert nodes["orders_etl.execute_replace_table_as_select_command [SPARK]"] == "green"
    assert "hive://hive-metastore:9083/sales.orders_daily (2 names)" in nodes
    then = {n["label"]: n["colour"] for n in screens["graphAsOf"]["view"]["nodes"]}
    assert then["orders_etl.execute_replace_table_as_select_command [SPARK]"] == "blue"
    edge = {n["label"]: n for n in screens["graphEdge"]["view"]["nodes"]}
    assert edge["bigquery/mock-project.test.upload (1 names)"]["beyond"] == "+1 down"
    deepest = max(n["depth"] for n in edge.values())
    assert {label.split(" ")[0] for label, n in edge.items() if n["depth"] == deepest} == {
        "bigquery/mock-project.test.upload"
    }
    page = screens["dataset"]["view"]
    assert page["title"] == "file:/tmp/cll_test/default.tbl1"
    assert page["schema"] == ["ident: integer", "trans: string", "agg: long"]
    assert page["firstSymlink"] == "default.tbl1"
    assert page["facetProducer"].endswith("/integration/spark")
    assert page["lifecycle"] == "CREATE" and page["versions"][0] >= 1
    assert any(c.startswith("default.cll_source2.c -> agg by ") for c in page["columns"])
    assert page["writers"] == [
        "open_lineage_integration_create_table.execute_create_hive_table_as_select_command"
        ".default_tbl1 green"
    ]
    job = screens["job"]["view"]
    assert job["title"] == "airflow/BQ green" and job["parent"] is None
    assert job["children"] == ["BQ.copy green", "BQ.download green", "BQ.upload green"]
    assert job["runs"] == "1 runs"
    hits = screens["search"]["view"]["hits"]
    assert "namespace hive://hive-metastore:9083" in hits
    assert (
        "dataset hdfs://dataproc-producer-test-m/user/hive/warehouse/default.t2 "
        "(as /user/hive/warehouse/t2)"
    ) in hits
    problem = screens["problem"]["view"]
    assert problem == {
        "status": 400,
        "advice": "fix the request",
        "named": ["stat"],
        "pointer": "null",
        "instance": "/api/v1/runs",
        "members": sorted(
            ["type", "title", "status", "detail", "instance", "pointer", "invalid-params"]
        ),
    }
