"""Field types compared engine-neutrally: one spelling for each type Spark, Hive, Trino,
PostgreSQL and BigQuery spell differently.

Spark writes `sales.orders_daily` with `order_id long`; Trino reads it as `bigint`,
PostgreSQL would say `int8` and BigQuery `INT64`: one type. Wherever two schemas are
compared (a new schema version or not, the lineage diff), types go through
`canonical_type` first. Where engines disagree on what a spelling means, the majority of
these engines wins: `integer` and `int` are 32 bits (BigQuery's `INTEGER` alias of INT64 is
the exception left out), `float` is 32 bits (PostgreSQL's `float` is 64), `timestamp`
without a zone is one type whatever its precision (Hive's `timestamp` is Trino's
`timestamp(3)`), and a string's length bound is not a type of its own (Trino reads Hive's
`string` as `varchar`, PostgreSQL's `varchar(20)` is text with a check).
"""

from __future__ import annotations

import functools
import re

# Canonical name of each plain (parameterless) spelling, lower case, spaces collapsed.
_PLAIN = {
    "tinyint": "tinyint",
    "byte": "tinyint",
    "int1": "tinyint",
    "smallint": "smallint",
    "short": "smallint",
    "int2": "smallint",
    "int16": "smallint",
    "int": "integer",
    "integer": "integer",
    "int4": "integer",
    "int32": "integer",
    "bigint": "bigint",
    "long": "bigint",
    "int8": "bigint",
    "int64": "bigint",
    "real": "real",
    "float": "real",
    "float4": "real",
    "float32": "real",
    "double": "double",
    "double precision": "double",
    "float8": "double",
    "float64": "double",
    "boolean": "boolean",
    "bool": "boolean",
    "string": "string",
    "varchar": "string",
    "text": "string",
    "character varying": "string",
    "char varying": "string",
    "nvarchar": "string",
    "char": "char",
    "character": "char",
    "binary": "binary",
    "varbinary": "binary",
    "bytea": "binary",
    "bytes": "binary",
    "blob": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp without time zone": "timestamp",
    "timestamp_ntz": "timestamp",
    "timestamp_ltz": "timestamp",
    "datetime": "timestamp",
    "timestamptz": "timestamp with time zone",
    "timestamp with time zone": "timestamp with time zone",
    "timestamp with local time zone": "timestamp",
    "time": "time",
    "time without time zone": "time",
    "timetz": "time with time zone",
    "time with time zone": "time with time zone",
    "decimal": "decimal",
    "numeric": "decimal",
    "dec": "decimal",
    "number": "decimal",
    "bignumeric": "decimal",
    "json": "json",
    "jsonb": "json",
    "uuid": "uuid",
    "interval": "interval",
}
# A parameterised spelling: name(args) with args that are numbers (a precision, a length).
_PARAMETERISED = re.compile(r"^([a-z_ ]+?)\s*\(\s*([0-9 ,]*)\s*\)\s*(.*)$")
# Types whose precision or length is not a type of its own (see the module's docstring).
_PARAMETERS_DROPPED = frozenset(
    {"string", "binary", "timestamp", "timestamp with time zone", "time", "time with time zone"}
)
_WHITESPACE = re.compile(r"\s+")


# (a handful of spellings come back with every schema; the bound keeps made-up ones small)
@functools.lru_cache(maxsize=4096)
def canonical_type(spelling: str) -> str:
    """The engine-neutral spelling of a field type: `long`, `bigint`, `int8` and `INT64`
    all give `bigint`; `decimal(12, 2)` and `NUMERIC(12,2)` give `decimal(12,2)`; an
    array, map or struct has its element types made canonical; an unknown type is kept,
    lower case with its spaces collapsed."""
    text = _WHITESPACE.sub(" ", spelling.strip().lower())
    if text.endswith("[]"):  # PostgreSQL's integer[]
        return f"array<{canonical_type(text[:-2])}>"
    if text.startswith("_") and text[1:] in _PLAIN:  # PostgreSQL's _int8 (array of int8)
        return f"array<{_PLAIN[text[1:]]}>"
    nested = _nested(text)
    if nested is not None:
        return nested
    plain = _PLAIN.get(text)
    if plain is not None:
        return plain
    match = _PARAMETERISED.match(text)
    if match is not None:
        name, args, rest = match.groups()
        base = _PLAIN.get(f"{name} {rest}".strip() if rest else name.strip())
        if base is not None:
            if base in _PARAMETERS_DROPPED:
                return base
            return f"{base}({args.replace(' ', '')})"
    return text


def _nested(text: str) -> str | None:
    """array<T> / array(T), map<K,V> / map(K,V), struct<a:T,...> / row(a T, ...): with
    their inner types canonical (None: not one of them)."""
    match = re.match(r"^(array|map|struct|row)\s*[<(](.*)[>)]$", text)
    if match is None:
        return None
    kind, inner = match.groups()
    parts = _split(inner)
    if kind == "array" and len(parts) == 1:
        return f"array<{canonical_type(parts[0])}>"
    if kind == "map" and len(parts) == 2:
        return f"map<{canonical_type(parts[0])},{canonical_type(parts[1])}>"
    if kind in ("struct", "row"):
        fields = []
        for part in parts:
            named = re.match(r'^"?([^":\s]+)"?\s*:?\s*(.+)$', part)
            if named is None:
                return None
            fields.append(f"{named.group(1)}:{canonical_type(named.group(2))}")
        return "struct<" + ",".join(fields) + ">"
    return None


def _split(inner: str) -> list[str]:
    """`inner` split at its top-level commas (not those inside <...> or (...))."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i].strip())
            start = i + 1
    parts.append(inner[start:].strip())
    return [p for p in parts if p]


def same_type(a: str | None, b: str | None) -> bool:
    """Whether two field types are one type (None: no type given, equal only to None)."""
    if a is None or b is None:
        return a is b
    return canonical_type(a) == canonical_type(b)
