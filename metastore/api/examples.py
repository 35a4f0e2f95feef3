"""Example bodies for the OpenAPI document, made from the response schemas themselves.

Each example is built from its schema (a property's own `examples` first, then its
format or type), so it is valid against the schema by construction (a test validates
every example), and it cannot fall behind a changed struct.
"""

from __future__ import annotations

from typing import Any

RUN_ID = "0191a3f2-7c1e-7a41-9b3e-3c6f0e1d01b8"
TIME = "2026-09-02T10:04:12.345Z"
# Values for strings by property name, where a bare "string" would read as nonsense.
STRINGS = {
    "namespace": "prod-lineage",
    "name": "orders_etl.execute_replace_table_as_select_command",
    "field": "order_id",
    "integration": "SPARK",
    "job_type": "JOB",
    "processing_type": "BATCH",
    "next_cursor": "WyJqb2JzIiwiZXhhbXBsZSJd",
    "detail": "no job with id 0191a3f2-7c1e-7a41-9b3e-3c6f0e1d01b8",
    "title": "Not Found",
    "type": "https://stackable.tech/metastore/problems/not-found",
    "key": f"job:{RUN_ID}",
    "from": f"dataset:{RUN_ID}",
    "to": f"job:{RUN_ID}",
    "position": "AAAAAAAAAAE",
}
MAX_DEPTH = 6


def example(schema: dict[str, Any], components: dict[str, Any], name: str = "") -> Any:
    return _value(schema, components, name, 0)


def _value(schema: dict[str, Any], components: dict[str, Any], name: str, depth: int) -> Any:
    if "$ref" in schema:
        target = components[schema["$ref"].rsplit("/", 1)[1]]
        return _value(target, components, name, depth)
    if "examples" in schema:
        return schema["examples"][0]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            options = [s for s in schema[union] if s.get("type") != "null"]
            return _value(options[0], components, name, depth)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        required = set(schema.get("required", ()))
        return {
            prop: _value(sub, components, prop, depth + 1)
            for prop, sub in schema.get("properties", {}).items()
            if prop in required or depth < MAX_DEPTH // 2
        }
    if kind == "array":
        if depth >= MAX_DEPTH or "items" not in schema:
            return []
        return [_value(schema["items"], components, name, depth + 1)]
    if kind == "string":
        return _string(schema, name)
    if kind == "integer":
        return max(schema.get("minimum", 1), 1)
    if kind == "number":
        return 252.345
    if kind == "boolean":
        return False
    return None


def _string(schema: dict[str, Any], name: str) -> str:
    fmt = schema.get("format")
    if fmt == "uuid":
        return RUN_ID
    if fmt == "date-time":
        return TIME
    if fmt == "date":
        return TIME[:10]
    if fmt == "uri":
        return "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/spark"
    return STRINGS.get(name, "RUNNING" if name == "state" else "text")
