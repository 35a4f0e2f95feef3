"""The OpenLineage envelope: what ingest checks of an event before it goes into the log.

Only the envelope is checked, per the 2-0-2 core schema (`OpenLineage.json`): the kind
follows from the shape (`run` and `job`: RunEvent; `job` alone: JobEvent; `dataset`:
DatasetEvent), `eventTime` is a date-time (without a timezone read as UTC, as real
producers send it), `run.runId` a UUID, `producer` a string, job and dataset names
non-empty. `schemaURL`, a string when sent, may be missing or null: the spec requires it,
but Marquez accepts events without it (its own fixtures have some) and hand-written
emitters leave it out, and the kind follows from the shape anyway. Facets are not looked
at: the event is stored exactly as sent, but for credentials (metastore/redact.py).

What the store and the read side cannot represent is refused here, so that every event
accepted can be folded and exported: an `eventTime` outside years 1-9999 in UTC (Python's
datetime and so every reader), a job or dataset name or namespace over MAX_NAME_BYTES (the
indexes that key them), more than MAX_EVENT_DATASETS datasets (the projector holds an
event's datasets at once), a key twice in one JSON object (consumers would read it apart),
U+0000 and numbers beyond `numeric` (jsonb).

The structs below are for checking only; the log keeps the original JSON text (re-encoded
only when credentials were masked), so fields we do not know survive. The digest (sha256 of
the canonical JSON of the event as stored: sorted keys, numbers normalized) makes a retry
that differs only in key order or whitespace the same event.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import hashlib
import json
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec

from metastore import redact
from metastore.eventlog import LogRecord

# A job's or dataset's namespace and name each at most this many bytes (UTF-8). They key
# btree indexes of the log and the read models (event_log_job, dataset_names, jobs, the
# edges), whose entries hold at most 2,704 bytes: two names at the limit and the other key
# columns fit, whatever the names' compressibility. A longer name was stored, then
# dead-lettered by the projections that index it (an incompressible job name was refused
# by PostgreSQL only, with its error).
MAX_NAME_BYTES = 1024
# The datasets (inputs and outputs) one event names at most. The projector holds every
# dataset of an event at once, a few KB of memory each over the projections: 800,000
# outputs in one 32 MB event took it to 2.4 GB. Real jobs name tens.
MAX_EVENT_DATASETS = 10_000

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
EventType = Literal["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]


class JobRef(msgspec.Struct):
    namespace: NonEmpty
    name: NonEmpty


class RunRef(msgspec.Struct):
    runId: uuid.UUID


class DatasetRef(msgspec.Struct):
    namespace: NonEmpty
    name: NonEmpty


class _Base(msgspec.Struct, kw_only=True):
    eventTime: dt.datetime
    producer: str
    schemaURL: str | None = None  # optional, unlike the spec: see the module's docstring


class RunEvent(_Base):
    run: RunRef
    job: JobRef
    eventType: EventType | None = None
    inputs: list[DatasetRef] = []
    outputs: list[DatasetRef] = []


class JobEvent(_Base):
    # The spec's JobEvent has no eventType; a JobEvent carrying one is still valid.
    job: JobRef
    inputs: list[DatasetRef] = []
    outputs: list[DatasetRef] = []


class DatasetEvent(_Base):
    dataset: DatasetRef


class EnvelopeError(Exception):
    """The request body or one event is not acceptable: a 4xx naming the field."""

    def __init__(self, status: int, detail: str, pointer: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.pointer = pointer


# PostgreSQL's numeric, and so the read models' jsonb, holds up to 131,072 digits before
# the decimal point and 16,383 after it.
NUMERIC_MAX_ADJUSTED = 131_071
NUMERIC_MAX_SCALE = 16_383


class BeyondNumeric(decimal.Decimal):
    """A number as sent that PostgreSQL's numeric cannot hold."""


class _Numbers(threading.local):
    """The float hook of the decoder: floats as Decimal so the digest sees the number as
    sent (a float would round 0.1000000000000000055 and make two different events one),
    normalized so that 1.50 == 1.5; a number beyond numeric is kept as sent and noted, per
    thread, for the decode under way (`_decode` clears the note first)."""

    beyond_numeric = False

    def __call__(self, text: str) -> decimal.Decimal:
        value = decimal.Decimal(text)
        exponent = value.as_tuple().exponent
        if value.is_finite() and (
            value.adjusted() > NUMERIC_MAX_ADJUSTED
            or (isinstance(exponent, int) and exponent < -NUMERIC_MAX_SCALE)
        ):
            self.beyond_numeric = True
            return BeyondNumeric(text)
        return value.normalize()


# One decoder for every event, with no context manager around it (`_decode`): making those
# per event was a noticeable part of an event's check.
_numbers = _Numbers()
_decoder = msgspec.json.Decoder(float_hook=_numbers)
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_canonical = msgspec.json.Encoder(decimal_format="number", order="sorted")
# A scrubbed event's stored text: the keys in the order sent, numbers as normalized.
_stored = msgspec.json.Encoder(decimal_format="number")

# A batch of a million tiny elements fits the byte limit, but checking and answering it
# would hold the event loop for seconds and make a 100 MB answer: refused as too large.
MAX_BATCH_EVENTS = 10_000

_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_PATH_PART = re.compile(r"\.(\w+)|\[(\d+)\]|\[\.\.\.\]")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`")


def parse_event(body: bytes) -> LogRecord:
    """Checks one event (the JSON text of a request body) and makes its log record."""
    if not body.strip():
        raise EnvelopeError(400, "the request body is empty; expected a JSON object")
    return _record(body, *_decode(body))


def split_batch(body: bytes) -> list[bytes]:
    """The elements of a batch (a JSON array of events), each as its original text.

    The whole body must be JSON (else 400) and an array (else 422) before its elements
    are looked at; the elements are then checked one at a time (`parse_element`), so a
    batch never exists as one decoded document: decoded whole, a large batch made millions
    of objects at once and held the event loop, mostly in the garbage collector.
    """
    if not body.strip():
        raise EnvelopeError(400, "the request body is empty; expected a JSON array of events")
    with _refusing_bad_json():
        try:
            raws = _raw_list_decoder.decode(body)
        except msgspec.ValidationError:  # no array: whether it is JSON at all decides 400/422
            _decode(body)
            raise EnvelopeError(422, "a batch is a JSON array of events", pointer="") from None
    # Skipping over an element does not look inside its strings; JSON is UTF-8 throughout.
    if not body.isascii():
        try:
            body.decode()
        except UnicodeDecodeError as exc:
            raise EnvelopeError(400, f"the request body is not valid UTF-8: {exc}") from None
    if len(raws) > MAX_BATCH_EVENTS:
        raise EnvelopeError(
            413, f"a batch holds at most {MAX_BATCH_EVENTS} events, this one {len(raws)}"
        )
    return [bytes(raw) for raw in raws]


def parse_element(text: bytes) -> LogRecord:
    """Checks one element of a batch (from `split_batch`) and makes its log record; an
    EnvelopeError's pointer is relative to the element."""
    return _record(text, *_decode(text))


@contextlib.contextmanager
def _refusing_bad_json() -> Iterator[None]:
    """Turns msgspec's refusal of bytes that are not JSON into a 400."""
    try:
        yield
    except (RecursionError, msgspec.DecodeError) as exc:  # a ValidationError is one too
        raise _bad_json(exc) from None


def _bad_json(exc: RecursionError | msgspec.DecodeError) -> EnvelopeError:
    if isinstance(exc, RecursionError):
        return EnvelopeError(400, "the JSON is nested too deeply")
    return EnvelopeError(400, f"the request body is not valid JSON: {exc}")


def _decode(body: bytes) -> tuple[Any, bool]:
    """The JSON document and whether it holds a number beyond numeric."""
    _numbers.beyond_numeric = False
    try:  # not `_refusing_bad_json`: see `_decoder`
        document = _decoder.decode(body)
    except (RecursionError, msgspec.DecodeError) as exc:
        raise _bad_json(exc) from None
    return document, _numbers.beyond_numeric


def _record(text: bytes, document: Any, beyond_numeric: bool) -> LogRecord:
    if not isinstance(document, dict):
        raise EnvelopeError(
            422, f"an event is a JSON object, not {_json_type(document)}", pointer=""
        )
    if "run" in document and "job" in document:
        run = _convert(document, RunEvent)
        kind, event_type, run_id, job = "run", run.eventType, run.run.runId, run.job
        event_time = run.eventTime
    elif "job" in document:
        job_event = _convert(document, JobEvent)
        kind, event_type, run_id, job = "job", None, None, job_event.job
        event_time = job_event.eventTime
    elif "dataset" in document:
        dataset_event = _convert(document, DatasetEvent)
        kind, event_type, run_id, job = "dataset", None, None, None
        event_time = dataset_event.eventTime
    elif "run" in document:
        raise EnvelopeError(422, "a run event needs a `job`", pointer="/job")
    else:
        raise EnvelopeError(
            422,
            "not an OpenLineage event: expected `run` and `job` (RunEvent), `job` "
            "(JobEvent) or `dataset` (DatasetEvent)",
            pointer="/job",
        )
    # The read models keep facets as jsonb, which cannot hold U+0000 or a number beyond
    # numeric: an event carrying one could never be projected, so it is refused rather than
    # stored unusable. Inside valid JSON, U+0000 can only be written as the escape, and the
    # decode notes a number beyond numeric: look closer only then.
    if beyond_numeric or b"\\u0000" in text:
        unstorable = _find_unstorable(document, "")
        if unstorable is not None:
            pointer, detail = unstorable
            raise EnvelopeError(422, detail, pointer=pointer)
    event_time = _storable_time(event_time)
    _check_names(document, kind)
    canonical = _canonical.encode(document)
    if _may_repeat_a_key(text, canonical):
        repeated = _find_repeated_key(text)
        if repeated is not None:
            pointer, key = repeated
            raise EnvelopeError(
                422,
                f"the key {key!r} occurs more than once in one JSON object; consumers "
                "would read such an event differently (first or last wins)",
                pointer=pointer,
            )
    job_namespace, job_name = (job.namespace, job.name) if job else (None, None)
    # Credentials are the one thing changed before the append (metastore/redact.py); the
    # digest is of the event as stored, so a retry is one event even after the scrub.
    if redact.may_hold_secrets(text) and redact.redact(document):
        _check_names(document, kind)  # the marker may be longer than what it replaced
        text = _stored.encode(document)
        canonical = _canonical.encode(document)
        if job is not None:  # the columns hold what the event holds
            job_namespace, job_name = document["job"]["namespace"], document["job"]["name"]
    digest = hashlib.sha256(canonical).digest()
    return LogRecord(
        writes=_writes(document, kind),
        event_time=event_time,
        kind=kind,
        event_type=event_type,
        run_id=run_id,
        job_namespace=job_namespace,
        job_name=job_name,
        producer=document["producer"],
        digest=digest,
        event_json=text,
    )


def _writes(document: dict[str, Any], kind: str) -> tuple[str, ...]:
    """The namespaces a checked event writes (after redaction, as stored)."""
    if kind == "dataset":
        return (document["dataset"]["namespace"],)
    outputs = document.get("outputs")
    if not outputs:
        return (document["job"]["namespace"],)
    return (document["job"]["namespace"], *(output["namespace"] for output in outputs))


# The instants every reader holds: Python's datetime (psycopg loads timestamptz into one)
# stops at years 1 and 9999; PostgreSQL's timestamptz holds more, so a stored
# "9999-12-31T23:59:59-14:00" (year 10000 in UTC) stopped the projector and the export.
_EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)
_LATEST = dt.datetime.max.replace(tzinfo=dt.UTC)
_TIME_RANGE = "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z"


def _storable_time(event_time: dt.datetime) -> dt.datetime:
    """`eventTime` in UTC (zone-less read as UTC), or a 422 when UTC cannot hold it."""
    if event_time.tzinfo is None:
        return event_time.replace(tzinfo=dt.UTC)
    try:
        return event_time.astimezone(dt.UTC)
    except OverflowError:  # (an offset carried it past year 1 or 9999)
        raise EnvelopeError(
            422, f"eventTime is outside what can be stored ({_TIME_RANGE} in UTC)", "/eventTime"
        ) from None


def _check_names(document: dict[str, Any], kind: str) -> None:
    """A 422 for the first job or dataset namespace or name over MAX_NAME_BYTES."""
    places: list[tuple[str, Any]] = []
    if kind == "dataset":
        places.append(("/dataset", document["dataset"]))
    else:
        places.append(("/job", document["job"]))
        named = 0
        for role in ("inputs", "outputs"):
            datasets = document.get(role) or ()
            if named + len(datasets) > MAX_EVENT_DATASETS:
                raise EnvelopeError(
                    422,
                    f"an event names at most {MAX_EVENT_DATASETS:,} datasets (inputs and "
                    f"outputs); this one {_dataset_count(document):,}",
                    pointer=f"/{role}/{MAX_EVENT_DATASETS - named}",
                )
            named += len(datasets)
            for index, ref in enumerate(datasets):
                places.append((f"/{role}/{index}", ref))
    for where, ref in places:
        for field in ("namespace", "name"):
            value = ref[field]
            # (a character is at most 4 bytes: most names need no encoding to pass)
            if len(value) * 4 > MAX_NAME_BYTES and len(value.encode()) > MAX_NAME_BYTES:
                raise EnvelopeError(
                    422,
                    f"the {field} is {len(value.encode()):,} bytes long; a namespace or name "
                    f"holds at most {MAX_NAME_BYTES:,} bytes (UTF-8)",
                    pointer=f"{where}/{field}",
                )


def _dataset_count(document: dict[str, Any]) -> int:
    return len(document.get("inputs") or ()) + len(document.get("outputs") or ())


def _may_repeat_a_key(text: bytes, canonical: bytes) -> bool:
    """False when no JSON object in `text` has a key twice; True when it may have.

    Exact in the False direction: each key is followed by one `:` outside strings, a `:`
    inside a string stays one `:` in the re-encoding, and nothing else writes one, so a
    key and value that decoding dropped (a repeated key: the last one wins) leave `text`
    with more colons than `canonical`. Only `\\u003a` (an escaped colon) makes a colon
    appear; an escape in that range is left to the exact check. Two scans of the bytes in
    C: about 1 µs for a 3 KB event, where the exact check (`_find_repeated_key`) parses the
    text again (25 µs for the conformance events).
    """
    if text.count(b":") != canonical.count(b":"):
        return True
    return b"\\" in text and b"\\u003" in text


class _Repeated:
    """What `_pairs` puts in place of an object with a repeated key."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> Any:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return _Repeated(key)
        seen.add(key)
    return dict(pairs)


def _find_repeated_key(text: bytes) -> tuple[str, str] | None:
    """(the JSON pointer of the first key that occurs twice in one object, the key), or None."""
    try:  # numbers as text: nothing here needs their value (and no digit limit applies)
        document = json.loads(text, object_pairs_hook=_pairs, parse_int=str, parse_float=str)
    except RecursionError:
        raise EnvelopeError(400, "the JSON is nested too deeply") from None
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        pointer, value = stack.pop()
        if isinstance(value, _Repeated):
            return pointer + "/" + _escape(value.key), value.key
        if isinstance(value, dict):
            stack.extend((pointer + "/" + _escape(k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{pointer}/{i}", v) for i, v in reversed(list(enumerate(value))))
    return None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _convert(document: dict[str, Any], shape: type[msgspec.Struct]) -> Any:
    try:
        return msgspec.convert(document, shape)
    except msgspec.ValidationError as exc:
        detail, pointer = _explain(str(exc))
        raise EnvelopeError(422, detail, pointer=pointer) from None


def _explain(message: str) -> tuple[str, str]:
    """msgspec's "Invalid UUID - at `$.run.runId`" as a detail and a JSON pointer."""
    match = _PATH.search(message)
    path = match.group("path") if match else ""
    detail = message[: match.start()] if match else message
    parts = [m.group(1) or m.group(2) or "" for m in _PATH_PART.finditer(path)]
    missing = _MISSING.match(detail)
    if missing:
        parts.append(missing.group("field"))
        detail = f"`{missing.group('field')}` is required"
    pointer = "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)
    return detail, pointer


_NUL = "strings cannot contain U+0000 (\\u0000)"
_BEYOND = (
    "the number is beyond what PostgreSQL's numeric holds "
    "(131,072 digits before the decimal point, 16,383 after)"
)


def _find_unstorable(value: Any, pointer: str) -> tuple[str, str] | None:
    """Where (a JSON pointer) and why the first value the read models cannot hold is: a
    string or key containing U+0000, or a number beyond numeric."""
    if isinstance(value, str):
        return (pointer, _NUL) if "\x00" in value else None
    if isinstance(value, BeyondNumeric):
        return pointer, _BEYOND
    if isinstance(value, dict):
        for key, item in value.items():
            child = pointer + "/" + key.replace("~", "~0").replace("/", "~1")
            if "\x00" in key:
                return child, _NUL
            found = _find_unstorable(item, child)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _find_unstorable(item, f"{pointer}/{index}")
            if found is not None:
                return found
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "a number"
