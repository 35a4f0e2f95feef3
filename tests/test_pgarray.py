"""Binary array parameters (metastore/pgarray.py) read back by PostgreSQL as what was meant."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg
import pytest

from metastore import pgarray


def read_back(conn: psycopg.Connection[Any], cast: str, array: pgarray.BinaryArray) -> Any:
    with conn.cursor() as cur:
        pgarray.register(cur)
        row = cur.execute(f"SELECT %(a)b::{cast}", {"a": array}).fetchone()
    assert row is not None
    return row[0]


def test_text_arrays_keep_every_string(conn: psycopg.Connection[Any]) -> None:
    values = ["spark", "", None, "Zürich ✓ 東京", '{"a": [1, "\\u00e9"]}', "x" * 100_000]
    assert read_back(conn, "text[]", pgarray.text_array(values)) == values
    as_bytes = [None if v is None else v.encode() for v in values]
    assert read_back(conn, "text[]", pgarray.text_array(as_bytes)) == values


def test_uuid_bytea_and_integer_arrays(conn: psycopg.Connection[Any]) -> None:
    ids = [uuid.uuid4(), None, uuid.UUID(int=0)]
    assert read_back(conn, "uuid[]", pgarray.uuid_array(ids)) == ids
    blobs = [b"\x00\xff" * 16, b"", None]
    assert read_back(conn, "bytea[]", pgarray.bytea_array(blobs)) == blobs
    numbers = [0, 1, -1, 2**31 - 1, -(2**31)]
    assert read_back(conn, "integer[]", pgarray.int4_array(numbers)) == numbers


def test_timestamps_keep_the_instant_to_the_microsecond(conn: psycopg.Connection[Any]) -> None:
    cest = dt.timezone(dt.timedelta(hours=2))
    times = [
        dt.datetime(2024, 10, 1, 12, 30, 15, 123456, tzinfo=dt.UTC),
        dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),  # before the epoch
        dt.datetime(2024, 10, 1, 14, 30, 15, 1, tzinfo=cest),
        dt.datetime(1, 1, 1, tzinfo=dt.UTC),
    ]
    assert read_back(conn, "timestamptz[]", pgarray.timestamptz_array(times)) == times


def test_an_empty_array(conn: psycopg.Connection[Any]) -> None:
    assert read_back(conn, "text[]", pgarray.text_array([])) == []


def test_an_array_of_the_wrong_element_type_is_refused(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.DatatypeMismatch):
        read_back(conn, "uuid[]", pgarray.text_array(["not a uuid"]))


def test_text_that_is_not_utf8_is_refused(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.CharacterNotInRepertoire):
        read_back(conn, "text[]", pgarray.text_array([b"\xff\xfe"]))


# The fold's rows travel as one such array a column (projections.common.row_param).

FOLD_COLUMNS: list[tuple[str, list[Any]]] = [
    ("text", ["spark", "", "Zürich ✓ 東京", "x" * 5_000, "y" * 4_095, "z" * 4_096]),
    ("uuid", [uuid.uuid4(), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)]),
    (
        "timestamptz",
        [
            dt.datetime(2024, 10, 1, 12, 30, 15, 123456, tzinfo=dt.UTC),
            dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
            dt.datetime(2024, 10, 1, 14, 30, 15, 1, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            dt.datetime(1, 1, 1, tzinfo=dt.UTC),
        ],
    ),
    ("bigint", [0, 1, -1, 2**63 - 1, -(2**63)]),
    ("smallint", [0, -1, 2**15 - 1, -(2**15)]),
    ("boolean", [True, False, True]),
    ("bytea", [b"\x00\xff" * 16, b"", b"\x01" * 5_000]),
]


@pytest.mark.parametrize(("kind", "values"), FOLD_COLUMNS, ids=[k for k, _ in FOLD_COLUMNS])
@pytest.mark.parametrize("nulls", [False, True], ids=["no NULL", "NULLs"])
def test_a_fold_column_reads_back_as_given(
    conn: psycopg.Connection[Any], kind: str, values: list[Any], nulls: bool
) -> None:
    given = [None, *values[:2], None, *values[2:], None] if nulls else values
    assert read_back(conn, f"{kind}[]", pgarray.column_array(kind, given)) == given
    # The same values again: the timestamps now come from what was encoded before.
    assert read_back(conn, f"{kind}[]", pgarray.column_array(kind, given)) == given


def test_a_fold_column_takes_what_the_rows_as_json_took(conn: psycopg.Connection[Any]) -> None:
    # (a text column's number as its digits, a uuid as its text, a naive time as UTC)
    texts = pgarray.column_array("text", ["a", 5, True, None, b"caf\xc3\xa9"])
    assert read_back(conn, "text[]", texts) == ["a", "5", "true", None, "café"]
    one = uuid.uuid4()
    assert read_back(conn, "uuid[]", pgarray.column_array("uuid", [str(one)])) == [one]
    naive = dt.datetime(2024, 1, 2, 3, 4, 5, 6)
    assert read_back(conn, "timestamptz[]", pgarray.column_array("timestamptz", [naive])) == [
        naive.replace(tzinfo=dt.UTC)
    ]
    with pytest.raises(KeyError):  # (not a boolean: the fold fails, it does not guess)
        pgarray.column_array("boolean", ["false"])
