"""The OpenAPI document: generated from the operation table and the response structs,
checked in as metastore/openapi.json, served at /api/v1/openapi.json, all the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from starlette.routing import Route

from metastore import api, ingest
from metastore.api.openapi import CHECKED_IN, build_document, render
from metastore.auth import required_scope
from metastore.problems import PROBLEM_BASE
from tests.support import running


def test_checked_in_document_is_the_generated_one() -> None:
    assert CHECKED_IN.read_bytes() == render(build_document()), "run `make openapi`"


def test_served_document_is_the_checked_in_one(database_url: str, tmp_path: Path) -> None:
    with running("api", database_url, tmp_path) as process:
        response = httpx.get(process.base_url + "/api/v1/openapi.json")
        assert response.status_code == 200
        assert response.content == CHECKED_IN.read_bytes()
        cached = httpx.get(
            process.base_url + "/api/v1/openapi.json",
            headers={"If-None-Match": response.headers["etag"]},
        )
        assert cached.status_code == 304


def test_every_read_route_is_documented_and_nothing_else() -> None:
    document = build_document()
    routed = set()
    for route in api.routes:
        assert isinstance(route, Route)
        for method in route.methods or ():
            if method != "HEAD":
                routed.add((method.lower(), "/api/v1" + route.path))
    documented = {
        (method, path)
        for path, ops in document["paths"].items()
        for method in ops
        if path.startswith("/api/v1/")
    }
    # POST /api/v1/lineage(/batch) is ingest at the clients' default path, not a read route.
    aliases = {("post", path) for path in ingest.ALIASES}
    assert aliases <= documented
    assert routed == documented - aliases
    for path in (
        "/ingest/openlineage",
        "/ingest/openlineage/batch",
        "/export/openlineage/events",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in document["paths"]


def test_info_says_experimental_and_scopes_are_per_path_group() -> None:
    document = build_document()
    assert document["openapi"] == "3.1.0"
    info = document["info"]
    assert info["title"] == "Stackable metastore API"
    assert info["x-experimental"] is True and "experimental" in info["version"]
    assert "Experimental" in info["description"]
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            # what the bearer-token middleware enforces for this very request
            expected = required_scope(path, method.upper())
            assert op["security"] == ([{"bearer": [expected]}] if expected else []), path
    assert document["paths"]["/api/v1/lineage"]["post"]["security"] == [{"bearer": ["ingest"]}]
    assert document["paths"]["/api/v1/lineage"]["get"]["security"] == [{"bearer": ["read"]}]


def test_every_operation_with_a_scope_documents_401_403_and_404() -> None:
    for path, ops in build_document()["paths"].items():
        for method, op in ops.items():
            if op["security"]:
                assert {"401", "403", "404"} <= set(op["responses"]), (method, path)
                assert "the detail names the paths" in op["responses"]["403"]["description"]


def test_every_schema_is_valid_json_schema_and_errors_are_problem_json() -> None:
    document = build_document()
    for schema in document["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    for path, ops in document["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        for op in ops.values():
            for status, answer in op["responses"].items():
                if status.startswith(("4", "5")):
                    assert list(answer["content"]) == ["application/problem+json"]
            for parameter in op.get("parameters", []):
                jsonschema.Draft202012Validator.check_schema(parameter["schema"])
                assert parameter["in"] in ("path", "query", "header")
    # Stable bytes: sorted keys, so a regenerated file diffs only where something changed.
    assert json.loads(render(document)) == document


def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_every_property_has_a_description_and_every_time_a_format() -> None:
    document = build_document()
    for path, ops in document["paths"].items():
        for op in ops.values():
            for parameter in op.get("parameters", []):
                assert parameter.get("description"), (path, parameter["name"])
    components = document["components"]["schemas"]
    for name, schema in components.items():
        for prop, sub in schema.get("properties", {}).items():
            assert sub.get("description"), f"{name}.{prop}"
            options = [_resolve(s, components) for s in sub.get("anyOf", [sub])]
            looks_like_time = prop.endswith(("_at", "_seen", "_time")) or prop in (
                "nominal_start",
                "nominal_end",
                "eventTime",
            )
            # (a stored event's eventTime is as the producer sent it, maybe without offset)
            if looks_like_time and name != "StoredEvent":
                formats = {o.get("format") for o in options if o.get("type") == "string"}
                assert formats == {"date-time"}, f"{name}.{prop}: {options}"


def test_every_response_has_an_example_valid_against_its_schema() -> None:
    document = build_document()
    components = document["components"]["schemas"]
    # The examples reference components: validate them with the document as the registry.
    resource = Resource.from_contents(
        {"components": {"schemas": components}}, default_specification=DRAFT202012
    )
    registry = Registry().with_resource("urn:openapi", resource)
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            for status, answer in op["responses"].items():
                for media, content in answer.get("content", {}).items():
                    if not media.endswith("json"):
                        continue
                    assert "example" in content, (path, method, status)
                    schema = {**content["schema"]}
                    if "$ref" in schema:
                        schema = {"$ref": "urn:openapi" + schema["$ref"]}
                    validator = jsonschema.Draft202012Validator(_rebase(schema), registry=registry)
                    validator.validate(content["example"])


def _rebase(schema: Any) -> Any:
    """`#/components/...` references made absolute against the registry's document."""
    if isinstance(schema, dict):
        return {
            k: ("urn:openapi" + v if k == "$ref" and v.startswith("#") else _rebase(v))
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_rebase(v) for v in schema]
    return schema


def test_problem_types_tell_errors_apart() -> None:
    document = build_document()
    described = document["components"]["schemas"]["Problem"]["properties"]["type"]["description"]
    for kind in ("not-found", "not-yet", "invalid-cursor", "invalid-request", "unavailable"):
        assert f"{PROBLEM_BASE}{kind}" in described
