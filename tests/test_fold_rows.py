"""The fold's rows as the server reads them (projections.common.rows_select, row_param)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg
import pytest

from metastore import pgarray
from projections.common import row_param, rows_select

TYPES = ("uuid", "text", "json", "jsonb", "timestamptz", "uuid[]", "bigint", "boolean", "bytea")


def test_rows_read_back_column_by_column(conn: psycopg.Connection[Any]) -> None:
    run, parent = uuid.uuid4(), uuid.uuid4()
    when = dt.datetime(2024, 10, 1, 12, 0, 0, 5, tzinfo=dt.UTC)
    rows = [
        (run, "orders", '{"b": 1,  "a": [2]}', '{"b": 1, "a": [2]}', when, f"{{{parent}}}", 7,
         True, b"\x00\x01"),
        (None, None, None, None, None, None, None, None, None),
        (parent, "", "null", "null", when, "{}", -1, False, b""),
    ]  # fmt: skip
    pgarray.register(conn)
    got = conn.execute(
        rows_select(TYPES), row_param(TYPES, [list(c) for c in zip(*rows, strict=True)])
    ).fetchall()
    assert got == [
        # json keeps its text as sent; jsonb is parsed (keys sorted); a JSON null is NULL
        (run, "orders", {"b": 1, "a": [2]}, {"a": [2], "b": 1}, when, [parent], 7, True,
         b"\x00\x01"),
        (None, None, None, None, None, None, None, None, None),
        (parent, "", None, None, when, [], -1, False, b""),
    ]  # fmt: skip
    json_text = conn.execute(
        f"SELECT c2::text FROM ({rows_select(TYPES)}) r LIMIT 1",
        row_param(TYPES, [list(c) for c in zip(*rows, strict=True)]),
    ).fetchone()
    assert json_text == ('{"b": 1,  "a": [2]}',)


def test_columns_of_unequal_length_are_refused() -> None:
    # (unnest would pad the shorter with NULLs: a row half lost)
    with pytest.raises(ValueError, match="rows"):
        row_param(("uuid", "text"), [[uuid.uuid4(), uuid.uuid4()], ["only one"]])


def test_a_column_type_without_an_encoder_is_refused_when_the_statement_is_made() -> None:
    with pytest.raises(ValueError, match="numeric"):
        rows_select(("uuid", "numeric"))
