"""Array parameters in PostgreSQL's binary array format, built in one pass.

psycopg dumps a list parameter element by element through Python-level dumpers, which
was a large part of the API's CPU per event in batch ingest (docs/PERFORMANCE.md,
"Batches"). The binary format is
simple (a header, then a length and the bytes of each element), and the elements here are
bytes already or nearly, so one `join` builds each array.

The dumper leaves the parameter's type unspecified: the SQL names it with a cast
(`%(kind)b::text[]`), and the array's header names its element type, which PostgreSQL
checks against the cast.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Iterable, Sequence

from psycopg.abc import AdaptContext
from psycopg.adapt import Dumper
from psycopg.pq import Format

# Element type oids (pg_type).
BYTEA = 17
INT4 = 23
TEXT = 25
TIMESTAMPTZ = 1184
UUID = 2950

_HEADER = struct.Struct("!iiiii")  # ndim, has nulls, element oid, length, lower bound
_NULL = b"\xff\xff\xff\xff"
_INT4 = struct.Struct("!i")
_INT8 = struct.Struct("!q")
_POSTGRES_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


class BinaryArray:
    """A one-dimensional array parameter, already in PostgreSQL's binary format."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class BinaryArrayDumper(Dumper):
    format = Format.BINARY
    oid = 0  # unspecified: the statement's cast gives the type

    def dump(self, obj: BinaryArray) -> bytes:
        return obj.data


def register(context: AdaptContext) -> None:
    """Lets `context` (a connection or a cursor) take BinaryArray parameters."""
    context.adapters.register_dumper(BinaryArray, BinaryArrayDumper)


def binary_array(element_oid: int, elements: Sequence[bytes | None]) -> BinaryArray:
    """An array of elements already in their type's binary format (None is NULL)."""
    if not elements:
        return BinaryArray(struct.pack("!iii", 0, 0, element_oid))
    has_null = None in elements
    parts = [_HEADER.pack(1, has_null, element_oid, len(elements), 1)]
    append = parts.append
    for element in elements:
        if element is None:
            append(_NULL)
        else:
            append(_INT4.pack(len(element)))
            append(element)
    return BinaryArray(b"".join(parts))


def text_array(values: Iterable[str | bytes | None]) -> BinaryArray:
    """text[] from str, or bytes that are UTF-8 already (PostgreSQL checks the encoding)."""
    return binary_array(TEXT, [v.encode() if isinstance(v, str) else v for v in values])


def bytea_array(values: Iterable[bytes | None]) -> BinaryArray:
    return binary_array(BYTEA, list(values))


def uuid_array(values: Iterable[uuid.UUID | None]) -> BinaryArray:
    return binary_array(UUID, [None if v is None else v.bytes for v in values])


def int4_array(values: Iterable[int]) -> BinaryArray:
    return binary_array(INT4, [_INT4.pack(v) for v in values])


def timestamptz_array(values: Iterable[dt.datetime]) -> BinaryArray:
    """timestamptz[] from timezone-aware datetimes (microseconds since 2000-01-01 UTC)."""
    return binary_array(
        TIMESTAMPTZ, [_INT8.pack((v - _POSTGRES_EPOCH) // _MICROSECOND) for v in values]
    )
