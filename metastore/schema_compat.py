"""Whether a schema change breaks a reader: the rules the lineage diff marks changes by.

A reader of a field keeps working when every value it could read before it can still read:
the field is there, and its new type holds every value of its old one. Types are compared
engine-neutrally (schema_types.canonical_type) and these changes are widenings, not
breaking:
- integers up the ladder tinyint < smallint < integer < bigint (`int` -> `bigint`);
- an integer to a decimal with as many integer digits (3, 5, 10, 19 by type), a 32-bit or
  smaller integer to `double` (and up to smallint to `real`), `real` to `double`;
- `decimal(p, s)` to `decimal(p2, s2)` with no fewer integer digits (p2 - s2 >= p - s) and no
  fewer decimals (s2 >= s);
- `date` to `timestamp`, `char` to `string`; an array's or map value's element widened.
Everything else is breaking: a field removed; a widening reversed (`bigint` -> `int`,
`double` -> `real`) is `narrowed`; any other type change (`string` -> `int`, `int` ->
`string`: a reader computing on it breaks) is `type_changed`; a field that said
`nullable: true` (or nothing: nullable) saying `nullable: false` is `made_required` (the
`schema` facet has no nullability; some producers add the key). A change to or from an
unknown type (no `type`) is not judged breaking. Adding a field never breaks a reader.
"""

from __future__ import annotations

import re

from metastore.schema_types import canonical_type

_LADDER = {"tinyint": 0, "smallint": 1, "integer": 2, "bigint": 3}
_DIGITS = {"tinyint": 3, "smallint": 5, "integer": 10, "bigint": 19}
_DECIMAL = re.compile(r"^decimal\((\d+)(?:,(\d+))?\)$")
_WIDER = {("real", "double"), ("date", "timestamp"), ("char", "string")}


def _decimal(kind: str) -> tuple[int, int] | None:
    """(integer digits, decimals) of a canonical `decimal(p,s)`, else None."""
    match = _DECIMAL.match(kind)
    if match is None:
        return None
    precision, scale = int(match[1]), int(match[2] or 0)
    return precision - scale, scale


def widens(old: str, new: str) -> bool:
    """Whether canonical type `new` holds every value of canonical type `old`."""
    if old.startswith("char(") and new == "string":  # (a char of any length)
        return True
    if old == new or (old, new) in _WIDER:
        return True
    if old in _LADDER and new in _LADDER:
        return _LADDER[old] <= _LADDER[new]
    if old in _LADDER:
        to_decimal = _decimal(new)
        if to_decimal is not None:
            return to_decimal[0] >= _DIGITS[old]
        return (new == "double" and _LADDER[old] <= 2) or (new == "real" and _LADDER[old] <= 1)
    before, after = _decimal(old), _decimal(new)
    if before is not None and after is not None:
        return after[0] >= before[0] and after[1] >= before[1]
    for kind in ("array<", "map<"):
        if old.startswith(kind) and new.startswith(kind):
            return _element_widens(old[len(kind) : -1], new[len(kind) : -1], kind == "map<")
    return False


def _element_widens(old: str, new: str, is_map: bool) -> bool:
    if not is_map:
        return widens(old, new)
    old_key, _, old_value = old.partition(",")
    new_key, _, new_value = new.partition(",")
    return old_key == new_key and widens(old_value, new_value)


def type_change(old: str | None, new: str | None) -> str | None:
    """How changing a field's type from `old` to `new` breaks a reader: `narrowed`,
    `type_changed`, or None (the same type, a widening, or a type unknown on one side)."""
    if old is None or new is None:
        return None
    before, after = canonical_type(old), canonical_type(new)
    if widens(before, after):
        return None
    return "narrowed" if widens(after, before) else "type_changed"


def made_required(old_nullable: bool | None, new_nullable: bool | None) -> bool:
    """A field nullable before (or not saying) that says it is not any more."""
    return old_nullable is not False and new_nullable is False
