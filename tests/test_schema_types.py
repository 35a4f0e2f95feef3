"""Field types compared engine-neutrally (metastore/schema_types.py): one table of the
spellings Spark, Hive, Trino, PostgreSQL and BigQuery use for the same type."""

from __future__ import annotations

import pytest

from metastore.schema_types import canonical_type, same_type

# (canonical, the spellings of it: Spark/Hive, Trino, PostgreSQL, BigQuery, ...)
SAME = [
    ("bigint", ["long", "bigint", "BIGINT", "int8", "INT64"]),
    ("integer", ["int", "integer", "INTEGER", "int4", "int32"]),
    ("smallint", ["short", "smallint", "int2"]),
    ("tinyint", ["byte", "tinyint"]),
    ("double", ["double", "DOUBLE", "double precision", "float8", "FLOAT64"]),
    ("real", ["float", "real", "float4"]),
    ("boolean", ["boolean", "bool", "BOOL", "BOOLEAN"]),
    ("string", ["string", "varchar", "VARCHAR(20)", "text", "character varying(255)", "STRING"]),
    ("binary", ["binary", "varbinary", "bytea", "BYTES"]),
    ("date", ["date", "DATE"]),
    ("timestamp", ["timestamp", "timestamp(3)", "timestamp(6) without time zone",
                   "timestamp_ntz", "DATETIME", "TIMESTAMP"]),
    ("timestamp with time zone", ["timestamptz", "timestamp with time zone",
                                  "timestamp(6) with time zone"]),
    ("decimal(12,2)", ["decimal(12,2)", "decimal(12, 2)", "numeric(12,2)", "NUMERIC(12,2)"]),
    ("decimal", ["decimal", "numeric", "NUMERIC"]),
    ("array<bigint>", ["array<long>", "array(bigint)", "ARRAY<INT64>", "bigint[]", "_int8"]),
    ("map<string,double>", ["map<string,double>", "map(varchar, double)"]),
    ("struct<id:bigint,name:string>", ["struct<id:long,name:string>",
                                       "row(id bigint, name varchar)",
                                       "STRUCT<id INT64, name STRING>"]),
]  # fmt: skip
DIFFERENT = [
    ("bigint", "integer"),
    ("double", "real"),
    ("decimal(12,2)", "decimal(18,2)"),
    ("timestamp", "timestamp with time zone"),
    ("string", "binary"),
    ("array<bigint>", "array<string>"),
    ("date", "timestamp"),
]


@pytest.mark.parametrize(("canonical", "spellings"), SAME, ids=[c for c, _ in SAME])
def test_spellings_of_one_type_are_one_type(canonical: str, spellings: list[str]) -> None:
    assert {s: canonical_type(s) for s in spellings} == dict.fromkeys(spellings, canonical)


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_types_stay_different(a: str, b: str) -> None:
    assert not same_type(a, b)


def test_an_unknown_type_is_kept() -> None:
    assert canonical_type("  GEOGRAPHY ") == "geography"
    assert canonical_type("my_udt(7)") == "my_udt(7)"
    assert same_type(None, None) and not same_type("bigint", None)
