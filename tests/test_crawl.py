"""A crawl of the read API over events generated from the official OpenLineage schemas.

Events come from the JSON schemas in ../shared/conformance/spec (the core RunEvent,
JobEvent and DatasetEvent, with dataset facets from each standard facet schema), drawn by
hypothesis through hypothesis-jsonschema, a bounded number of them; with them the stores
of issue 35 at small sizes (a dataset of 2,001 names, a 500-field table, Trino queries,
facet parts that break their schema) and generated workload events. They go in through
real ingest, are folded, and then every GET of the read API is asked for every object
they made: each answer must be a 200 (or the 404 `not-yet` of `as_of` or of a diff's
moments) that validates against metastore/openapi.json and stays within the answer size
limit (issue 35, point 6).

The last test checks the plans of the reads that were slow (point 2): PostgreSQL's
auto_explain logs each statement's plan, and none may scan the large tables whole or be
compiled by JIT, whatever the number of a dataset's names.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import psycopg
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from bench import datagen, hard_cases
from metastore.api.openapi import CHECKED_IN
from projections.runner import catch_up
from tests.conftest import Server
from tests.support import (
    CONFORMANCE,
    all_scenario_events,
    plan_nodes,
    plans_logged,
    running,
    server_log,
)

SPEC = CONFORMANCE / "spec"
MAX_ANSWER_BYTES = 16 * 1024 * 1024  # the stated limit (metastore/api/limits.py)
EXAMPLES = 10  # drawn RunEvents (the draws take a third of the crawl's time)
FACET_EXAMPLES = 1  # drawn facets of each standard facet schema
AS_OF = "2025-03-01T02:00:20Z"  # amid the Trino queries: some objects are not yet

# --- events from the schemas ------------------------------------------------------------


def _inline(node: Any, defs: dict[str, Any], stack: tuple[str, ...] = ()) -> Any:
    """The schema with its references inlined (local ones and the core's, which the facet
    schemas use); a recursive one (nested schema fields) is cut at its second level."""
    if isinstance(node, list):
        return [_inline(v, defs, stack) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        if stack.count(name) >= 2:
            return False
        target = _inline(defs[name], defs, (*stack, name))
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {"allOf": [target, _inline(rest, defs, stack)]} if rest else target
    return {
        k: v if k in ("description", "example") else _inline(v, defs, stack)
        for k, v in node.items()
        if k not in ("$defs", "$id", "$schema")
    }


def _merge_all_of(node: Any) -> Any:
    """allOf of object schemas as one object schema: hypothesis-jsonschema draws an allOf
    by filtering, several times slower."""
    if isinstance(node, list):
        return [_merge_all_of(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _merge_all_of(v) for k, v in node.items()}
    parts = node.pop("allOf", None)
    if parts is None:
        return node
    merged: dict[str, Any] = {}
    for part in [*parts, node]:
        if not isinstance(part, dict):
            return {"allOf": parts, **node}
        for key, value in part.items():
            if key == "properties":
                merged.setdefault("properties", {}).update(value)
            elif key == "required":
                merged["required"] = sorted({*merged.get("required", []), *value})
            elif key in merged and merged[key] != value and key not in ("description", "example"):
                if key != "additionalProperties":
                    return {"allOf": parts, **node}
                merged[key] = value
            else:
                merged[key] = value
    return merged


def _without_facets(node: Any) -> Any:
    """The core schema less its facet maps (the standard facets are drawn from their own
    schemas and put in; drawn from the core's generic facet maps, one event took a second)."""
    if isinstance(node, list):
        return [_without_facets(v) for v in node]
    if not isinstance(node, dict):
        return node
    return {
        k: _without_facets(v)
        for k, v in node.items()
        if k not in ("facets", "inputFacets", "outputFacets")
        or not isinstance(v, dict)
        or set(v) <= {"description"}
    }


def _core() -> dict[str, Any]:
    core = json.loads((SPEC / "OpenLineage.json").read_text())
    return {name: _without_facets(schema) for name, schema in core["$defs"].items()}


def _strategy(schema: Any) -> st.SearchStrategy[Any]:
    return from_schema(_merge_all_of(schema), custom_formats={"uuid": st.uuids().map(str)})


def _draw(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    drawn: list[Any] = []

    @settings(
        max_examples=n,
        database=None,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn


def _facets(section: str) -> list[tuple[str, Any]]:
    """FACET_EXAMPLES facets drawn from each standard facet schema of a section (Run, Job,
    Dataset), as (name, facet)."""
    core = json.loads((SPEC / "OpenLineage.json").read_text())["$defs"]
    drawn = []
    for path in sorted((SPEC / "facets").glob(f"*{section}Facet.json")):
        doc = json.loads(path.read_text())
        for name, schema in doc.get("properties", {}).items():
            facet = _strategy(_inline(schema, {**core, **doc.get("$defs", {})}))
            drawn += [(name, value) for value in _draw(facet, FACET_EXAMPLES)]
    return drawn


def schema_events() -> list[dict[str, Any]]:
    """RunEvents, JobEvents and DatasetEvents drawn from the core schema, with standard
    run, job and dataset facets drawn from theirs, dealt out in turn."""
    defs = _core()
    facets = {section: _facets(section) for section in ("Run", "Job", "Dataset")}
    dealt = {section: 0 for section in facets}

    def deal(section: str, into: dict[str, Any]) -> None:
        for _ in range(3):
            name, value = facets[section][dealt[section] % len(facets[section])]
            dealt[section] += 1
            into.setdefault("facets", {})[name] = value

    events = []
    for kind, n in (("RunEvent", EXAMPLES), ("JobEvent", 5), ("DatasetEvent", 5)):
        for event in _draw(_strategy(_inline(defs[kind], defs)), n):
            for section, part in (("Run", event.get("run")), ("Job", event.get("job"))):
                if isinstance(part, dict):
                    deal(section, part)
            datasets = [*(event.get("inputs") or []), *(event.get("outputs") or [])]
            for dataset in [*datasets, event.get("dataset")]:
                if isinstance(dataset, dict):
                    deal("Dataset", dataset)
            events.append(event)
    return events


def case_events() -> list[dict[str, Any]]:
    """The stores that were slow, large or invalid (bench/hard_cases.py), at small sizes,
    with workload events and the conformance scenarios around them."""
    return [
        *hard_cases.many_names(names=2_000, runs=2),
        *hard_cases.wide(fields=500),
        *hard_cases.trino(queries=20),
        *hard_cases.malformed_parts(),
        *(json.loads(e) for e in datagen.events(60, 250, 7)),
        *all_scenario_events(),
    ]


# --- the store ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(
    pg_server: Server, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, dict[str, int]]]:
    drawn = schema_events()
    log_dir: Path = tmp_path_factory.mktemp("crawl")
    with pg_server.database("crawl", template_db) as url, running("api", url, log_dir) as api:
        outcomes = {"stored": 0, "refused": 0}
        with httpx.Client(base_url=api.base_url, timeout=60) as client:
            for batch in (drawn, case_events()):
                for start in range(0, len(batch), 500):
                    answer = client.post(
                        "/ingest/openlineage/batch", json=batch[start : start + 500]
                    )
                    assert answer.status_code == 200, answer.text
                    summary = answer.json()["summary"]
                    outcomes["stored"] += summary["successful"]
                    outcomes["refused"] += summary["failed"]
        catch_up(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")  # the planner's statistics, as autovacuum would keep them
        yield url, api.base_url, outcomes


# --- the crawl --------------------------------------------------------------------------


class Crawler:
    """GETs paths, checks each answer against the document, remembers what it saw."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.document = json.loads(CHECKED_IN.read_text())
        registry = Registry().with_resource(
            "urn:openapi",
            Resource.from_contents(self.document, default_specification=DRAFT202012),
        )
        self.validators: dict[str, jsonschema.Draft202012Validator] = {}
        for template, item in self.document["paths"].items():
            get = item.get("get")
            if not template.startswith("/api/v1/") or get is None:
                continue
            schema = get["responses"]["200"]["content"]["application/json"]["schema"]
            ref = schema.get("$ref", "").replace("#/", "urn:openapi#/")
            self.validators[get["operationId"]] = jsonschema.Draft202012Validator(
                {"$ref": ref} if ref else schema, registry=registry
            )
        self.visited: dict[str, int] = {}
        self.slowest = (0.0, "")
        self.largest = (0, "")

    def get(self, operation: str, path: str, **params: Any) -> Any:
        url = path + ("?" + urllib.parse.urlencode(params) if params else "")
        started = time.perf_counter()
        answer = self.client.get(url)
        took = time.perf_counter() - started
        self.slowest = max(self.slowest, (took, url))
        self.largest = max(self.largest, (len(answer.content), url))
        assert len(answer.content) <= MAX_ANSWER_BYTES, url
        self.visited[operation] = self.visited.get(operation, 0) + 1
        # (a diff's `to` is now when left out: a dataset of a later eventTime is not yet)
        if answer.status_code == 404 and {"as_of", "from"} & params.keys():
            assert answer.json()["type"].endswith("/not-yet"), (url, answer.text)
            return None
        assert answer.status_code == 200, (url, answer.status_code, answer.text[:500])
        body = answer.json()
        errors = list(self.validators[operation].iter_errors(body))
        assert not errors, (url, [e.message[:300] for e in errors[:3]])
        return body

    def pages(self, operation: str, path: str, **params: Any) -> list[Any]:
        """Every item of a list, page by page (a small page size, so cursors are used)."""
        items: list[Any] = []
        cursor = None
        while True:
            page = self.get(operation, path, **params, **({"cursor": cursor} if cursor else {}))
            items += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return items


def test_every_get_of_every_object_matches_the_document(
    store: tuple[str, str, dict[str, int]],
) -> None:
    _, base_url, outcomes = store
    assert outcomes["stored"] > 300  # the drawn events that ingest refused are fine
    with httpx.Client(base_url=base_url + "/api/v1", timeout=60) as client:
        crawl = Crawler(client)
        crawl.get("getStatus", "/status")
        position = crawl.get("getChanges", "/changes")["position"]
        crawl.get("getChanges", "/changes", since=position)
        for namespace in crawl.pages("listNamespaces", "/namespaces", limit=7):
            crawl.pages("listJobs", "/jobs", namespace=namespace["name"], limit=200)
            crawl.pages("listDatasets", "/datasets", namespace=namespace["name"], limit=200)
            crawl.get("getNamespaceStats", "/namespace-stats", namespace=namespace["name"])
            crawl.get(
                "getNamespaceStats", "/namespace-stats", namespace=namespace["name"], as_of=AS_OF
            )
        for job in crawl.pages("listJobs", "/jobs", limit=500):
            ref = f"/jobs/{job['id']}"
            crawl.get("getJob", ref)
            crawl.get("getJob", ref, as_of=AS_OF)
            crawl.get("getJobStats", ref + "/stats")
            crawl.get("getJobStats", ref + "/stats", as_of=AS_OF)
            for direction in ("input", "output"):
                crawl.pages("listJobDatasets", ref + "/datasets", direction=direction)
            crawl.get("getLineage", "/lineage", node=f"job:{job['id']}")
            crawl.get("getLineage", "/lineage", node=f"job:{job['id']}", as_of=AS_OF)
        for run in crawl.pages("listRuns", "/runs", limit=500):
            ref = f"/runs/{run['id']}"
            crawl.get("getRun", ref)
            crawl.pages("listRunEvents", ref + "/events", limit=100)
            for direction in ("input", "output"):
                crawl.pages("listRunDatasets", ref + "/datasets", direction=direction)
            crawl.get("getRunLineage", "/lineage/runs", run_id=run["id"], direction="both")
            crawl.get("getImpact", "/impact", node=f"run:{run['id']}")
        fields_crawled = False
        for dataset in crawl.pages("listDatasets", "/datasets", limit=500):
            ref = f"/datasets/{dataset['id']}"
            crawl.get("getDataset", ref)
            crawl.get("getDataset", ref, as_of=AS_OF)
            crawl.pages("listDatasetVersions", ref + "/versions", limit=100)
            crawl.pages("listDatasetRuns", ref + "/runs", limit=100)
            columns = crawl.get(
                "getColumnLineage", ref + "/column-lineage", direction="both", depth=10
            )
            edges = (columns or {}).get("edges", [])
            if edges and edges[0]["from"]["dataset"] and not fields_crawled:
                # (once: a field with dependents; the walk is column lineage's, crawled above)
                source = edges[0]["from"]
                node = f"field:{source['dataset']['id']}:{source['field']}"
                crawl.get("getImpact", "/impact", node=node, depth=10)
                fields_crawled = True
            crawl.get("getColumnLineage", ref + "/column-lineage", direction="both", as_of=AS_OF)
            crawl.get("getLineage", "/lineage", node=f"dataset:{dataset['id']}")
            crawl.get("getImpact", "/impact", node=f"dataset:{dataset['id']}", as_of=AS_OF)
            crawl.get(
                "getLineageDiff",
                "/lineage/diff",
                node=f"dataset:{dataset['id']}",
                **{"from": AS_OF},
            )
            crawl.get("search", "/search", q=dataset["name"][-12:] or "x")
        crawl.get("getOpenAPI", "/openapi.json")
    everything = {op for op in crawl.validators}
    assert set(crawl.visited) == everything, everything - set(crawl.visited)
    print(
        f"crawl: {sum(crawl.visited.values())} answers; slowest {crawl.slowest[0]:.3f} s "
        f"({crawl.slowest[1]}), largest {crawl.largest[0]:,} B ({crawl.largest[1]})"
    )


# --- the plans of the reads that were slow -----------------------------------------------

LARGE_TABLES = {
    "column_lineage_runs",
    "run_edges",
    "job_edges",
    "schema_observations",
}
# The distinct column lineage reports, their outputs and input names: a page or two here
# (where a scan is the planner's right choice); a scan of them must not look at many rows.
REPORT_TABLES = {"column_reports", "column_lineage", "column_inputs"}
SCANNED_ROWS = 1_000


def test_the_slow_reads_use_indexes_and_no_jit_whatever_the_names(
    store: tuple[str, str, dict[str, int]], pg_server: Server, tmp_path: Path
) -> None:
    log_file = server_log(pg_server)
    url, _, _ = store
    with psycopg.connect(url, autocommit=True) as conn:
        ids = {
            name: conn.execute(
                "SELECT dataset_id FROM readmodel.dataset_names WHERE namespace = %s AND name = %s",
                name,
            ).fetchone()[0]  # type: ignore[index]
            for name in (hard_cases.MANY_NAMES, hard_cases.WIDE, hard_cases.TRINO_TARGET)
        }
        deep = conn.execute(
            "SELECT n.dataset_id FROM readmodel.column_lineage c JOIN readmodel.dataset_names n"
            " ON n.namespace = c.out_namespace AND n.name = c.out_name"
            " WHERE c.out_name LIKE '%%t11_%%' ORDER BY 1 LIMIT 1"
        ).fetchone()[0]  # type: ignore[index]
    names, wide, trino = (
        ids[n] for n in (hard_cases.MANY_NAMES, hard_cases.WIDE, hard_cases.TRINO_TARGET)
    )
    reads = [
        f"/datasets/{names}/column-lineage?direction=downstream&depth=1",
        f"/datasets/{names}/column-lineage?direction=downstream&depth=1&as_of=2030-01-01T00:00:00Z",
        f"/datasets/{names}/runs",
        f"/datasets/{wide}/column-lineage?as_of=2030-01-01T00:00:00Z",
        f"/datasets/{deep}/column-lineage?direction=both&depth=10",
        f"/datasets/{deep}/column-lineage?direction=both&depth=10&as_of=2024-10-02T00:00:00Z",
        f"/datasets/{trino}/column-lineage",
        f"/datasets/{trino}/column-lineage?as_of={AS_OF}",
    ]
    with plans_logged(url, log_file) as logged:
        with running("api", url, tmp_path) as api:  # new connections: auto_explain loaded
            for read in reads:
                answer = httpx.get(api.base_url + "/api/v1" + read, timeout=60)
                assert answer.status_code == 200, (read, answer.text)
        plans = logged()
    assert len(plans) >= len(reads)
    for plan in plans:
        query = plan["Query Text"][:200]
        assert "JIT" not in plan, f"compiled by JIT: {query}"
        for node in plan_nodes(plan["Plan"]):
            scanned = node.get("Relation Name")
            assert not (node["Node Type"] == "Seq Scan" and scanned in LARGE_TABLES), (
                f"{scanned} scanned whole by {query}"
            )
            if node["Node Type"] == "Seq Scan" and scanned in REPORT_TABLES:
                looked = node["Actual Loops"] * (
                    node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
                )
                assert looked < SCANNED_ROWS, f"{scanned}: {looked} rows scanned by {query}"
