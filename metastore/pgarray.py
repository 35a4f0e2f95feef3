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
import operator
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from typing import Any

import msgspec
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


# Columns of a fold's rows (projections.common.row_param): the same arrays, with as few
# Python steps an element as can be (map, zip and join run in C; a fixed-width column is
# joined by its length as separator), since a fold sends about 80 values an event.
BOOL = 16
INT2 = 21
INT8 = 20
_INT2 = struct.Struct("!h")
_BOOLEANS = {True: b"\x01", False: b"\x00"}  # (anything else is not a boolean: KeyError)

# A timestamp's element by the datetime: a batch's rows repeat their events' few times
# (first and last seen, state, start and end), and a datetime's microseconds since 2000 cost
# a quarter of a microsecond (timedelta division), a lookup a thirtieth of that. Cleared
# when full. A rebuild's thread folds beside the live fold: each entry is its key's encoding
# whoever made it, so the two may share it.
_TIMESTAMPS: dict[dt.datetime, bytes] = {}
_TIMESTAMPS_KEPT = 100_000


def _timestamps(values: list[Any]) -> list[bytes]:
    found = list(map(_TIMESTAMPS.get, values))
    if None not in found:
        return found  # type: ignore[return-value]
    if len(_TIMESTAMPS) > _TIMESTAMPS_KEPT:
        _TIMESTAMPS.clear()
    for i, value in enumerate(values):
        if found[i] is None:
            aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)  # (UTC sessions)
            found[i] = _TIMESTAMPS[value] = _INT8.pack((aware - _POSTGRES_EPOCH) // _MICROSECOND)
    return found  # type: ignore[return-value]


def _uuids(values: list[Any]) -> list[bytes]:
    # (UUID.bytes is a Python property; its int and int.to_bytes are C)
    try:
        return list(map(int.to_bytes, map(_UUID_INT, values), repeat(16)))
    except AttributeError:  # a uuid given as text
        return [uuid.UUID(str(v)).bytes for v in values]


_UUID_INT = operator.attrgetter("int")


def _texts(values: list[Any]) -> list[bytes]:
    try:
        return list(map(str.encode, values))
    except TypeError:  # (not every value a str: each on its own)
        return list(map(_text_bytes, values))


def _text_bytes(value: Any) -> bytes:
    # A str in UTF-8; bytes as UTF-8 already; anything else as its JSON text, which is what
    # `->>` gave when the rows travelled as JSON (a number's digits, true, false).
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes):
        return value
    return msgspec.json.encode(value)


def _as_is(values: list[Any]) -> list[bytes]:
    return values


# A column's SQL type -> its array's element oid, its elements' width (None: each has its
# own length) and what makes their bytes (of the values that are not None).
COLUMN_ENCODERS: dict[str, tuple[int, int | None, Callable[[list[Any]], list[bytes]]]] = {
    "text": (TEXT, None, _texts),
    "bytea": (BYTEA, None, _as_is),
    "uuid": (UUID, 16, _uuids),
    "timestamptz": (TIMESTAMPTZ, 8, _timestamps),
    "bigint": (INT8, 8, lambda values: list(map(_INT8.pack, values))),
    "smallint": (INT2, 2, lambda values: list(map(_INT2.pack, values))),
    "boolean": (BOOL, 1, lambda values: list(map(_BOOLEANS.__getitem__, values))),
}


# The 4-byte lengths of short elements, made once: struct's pack, called for each element,
# was a third of a text column's time.
_LENGTHS = [_INT4.pack(n) for n in range(4096)]
_NULL_ELEMENT = (_NULL, b"")


def _length(data: bytes) -> bytes:
    return _LENGTHS[len(data)] if len(data) < 4096 else _INT4.pack(len(data))


def column_array(kind: str, values: Sequence[Any]) -> BinaryArray:
    """The `kind`[] (a key of COLUMN_ENCODERS) of `values` (None is NULL)."""
    oid, width, encode = COLUMN_ENCODERS[kind]
    if not values:
        return BinaryArray(struct.pack("!iii", 0, 0, oid))
    # (`None in values` compared each value with None: UUID's __eq__ is Python)
    has_null = not all(map(operator.is_not, values, repeat(None)))
    data = encode([v for v in values if v is not None] if has_null else list(values))
    header = _HEADER.pack(1, has_null, oid, len(values), 1)
    if width is not None and not has_null:
        return BinaryArray(b"".join((header, _LENGTHS[width], _LENGTHS[width].join(data))))
    if width is not None:
        lengths = [_LENGTHS[width]] * len(data)
    else:
        try:
            lengths = list(map(_LENGTHS.__getitem__, map(len, data)))
        except IndexError:  # (an element of 4,096 bytes or more)
            lengths = list(map(_length, data))
    if has_null:
        pairs = iter(zip(lengths, data, strict=True))
        framed = [_NULL_ELEMENT if v is None else next(pairs) for v in values]
        return BinaryArray(header + b"".join(chain.from_iterable(framed)))
    parts: list[bytes] = [header] * (2 * len(data) + 1)
    parts[1::2], parts[2::2] = lengths, data
    return BinaryArray(b"".join(parts))
