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
