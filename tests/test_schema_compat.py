"""The rules the lineage diff marks breaking schema changes by (metastore/schema_compat.py)."""

from __future__ import annotations

import pytest

from metastore.schema_compat import made_required, type_change


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("int", "bigint"),
        ("long", "bigint"),  # (one type, spelled by two engines)
        ("smallint", "int"),
        ("int", "decimal(10,0)"),
        ("int", "double"),
        ("float", "double"),
        ("decimal(10,2)", "decimal(12,2)"),
        ("decimal(10,2)", "decimal(11,3)"),
        ("date", "timestamp"),
        ("char(3)", "varchar"),
        ("array<int>", "array<bigint>"),
        ("map<string,int>", "map<string,bigint>"),
        (None, "int"),  # (unknown before: not judged)
    ],
)
def test_widenings_do_not_break_a_reader(old: str | None, new: str) -> None:
    assert type_change(old, new) is None


@pytest.mark.parametrize(
    ("old", "new", "how"),
    [
        ("bigint", "int", "narrowed"),
        ("double", "float", "narrowed"),
        ("decimal(12,2)", "decimal(10,2)", "narrowed"),
        ("timestamp", "date", "narrowed"),
        ("string", "int", "type_changed"),
        ("int", "string", "type_changed"),
        ("bigint", "double", "type_changed"),  # (a double cannot hold every bigint)
        ("int", "decimal(5,0)", "type_changed"),
        ("boolean", "int", "type_changed"),
        ("array<bigint>", "array<int>", "narrowed"),
    ],
)
def test_narrowed_and_incompatible_types_break_a_reader(old: str, new: str, how: str) -> None:
    assert type_change(old, new) == how


def test_a_field_made_required_is_narrowed() -> None:
    assert made_required(None, False) and made_required(True, False)
    assert not made_required(False, False) and not made_required(False, True)
    assert not made_required(None, None)
