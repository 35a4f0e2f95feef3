"""POST /ingest/openlineage (one event) and /ingest/openlineage/batch (an array of events),
and the same at /api/v1/lineage and /api/v1/lineage/batch (the OpenLineage clients' default).

The body is read with a size limit (METASTORE_MAX_EVENT_BYTES, before and after gzip, so
a gzip bomb stops at the limit) and against the process's budget of bytes in flight
(METASTORE_MAX_INFLIGHT_BYTES, metastore/inflight.py: 503 past it), the envelope is
checked (metastore/envelope.py), and the events go to the group committer; the answer is
sent only after their commit.

Ingest is an ASGI app of its own, answered before the Starlette application
(metastore/app.py): it is the hot path, and Starlette's router and exception middlewares
cost about as much CPU per event as ingest's own work (docs/PERFORMANCE.md, "Ingest ahead
of the router"). The access log and the bearer-token check still wrap the app.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from typing import NamedTuple

import msgspec
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from metastore.authz import Authorizer
from metastore.config import Settings
from metastore.db import DATABASE_UNAVAILABLE, RETRY_AFTER_S, database_unavailable
from metastore.envelope import EnvelopeError, parse_element, parse_event, split_batch
from metastore.eventlog import LogRecord
from metastore.group_commit import GroupCommitter, Unavailable
from metastore.inflight import Claim, InflightBudget
from metastore.metrics import INGEST_EVENTS, INGEST_PAYLOAD_BYTES, INGEST_REQUESTS
from metastore.principal import ANONYMOUS, Principal, principal_of
from metastore.problems import ProblemError, from_error, problem_response
from metastore.write_decision import authorize_writes

# A missing Content-Type is read as JSON: several emitters (curl scripts, older clients)
# omit it, and the body is checked as JSON anyway. Anything else is 415.
JSON_MEDIA_TYPES = {"", "application/json"}
GZIP_ENCODINGS = {"gzip", "x-gzip"}
IDENTITY_ENCODINGS = {"", "identity"}
# The one transfer coding the HTTP parser applies. Another (`gzip, chunked`) would be read
# as if plain: 501, as RFC 9112 section 6.1 has it for a coding the server does not apply
# (compression belongs in Content-Encoding). The OpenLineage clients retry only 500, 502,
# 503 and 504, so a 501 is not sent again. Ingest is the only reader of request bodies.
APPLIED_TRANSFER_CODINGS = frozenset({"chunked"})

EVENT_PATH = "/ingest/openlineage"
BATCH_PATH = "/ingest/openlineage/batch"
PATHS = frozenset({EVENT_PATH, BATCH_PATH})
# The OpenLineage clients post to `api/v1/lineage` unless told otherwise (the Python and
# Java clients' default, Marquez's path): a POST there is the same ingest, so an emitter
# left at its defaults loses nothing. GET /api/v1/lineage stays the read API's graph.
ALIAS_EVENT_PATH = "/api/v1/lineage"
ALIASES = {ALIAS_EVENT_PATH: EVENT_PATH, "/api/v1/lineage/batch": BATCH_PATH}
WAY_IN = (
    "POST OpenLineage events to /ingest/openlineage (one event) or /ingest/openlineage/batch "
    "(a JSON array of events); /api/v1/lineage, the OpenLineage clients' default, works too"
)

SUCCESS = b'{"status":"success"}'

# Checking a batch's events gives the event loop back every so many events (about a
# millisecond of work), so a large batch does not stall the other requests.
YIELD_EVERY = 32


class BatchSummary(msgspec.Struct):
    received: int
    successful: int
    failed: int
    retriable: int
    non_retriable: int


class FailedEvent(msgspec.Struct, omit_defaults=True):
    index: int
    reason: str
    retriable: bool
    pointer: str | None = None  # the offending field, relative to the event


class BatchResult(msgspec.Struct):
    status: str  # "success" | "partial_success"
    summary: BatchSummary
    failed_events: list[FailedEvent]


_encoder = msgspec.json.Encoder()
# Labelled once: `labels()` on every request is a dict lookup and a lock on the hot path.
_ANSWERED_200 = {kind: INGEST_REQUESTS.labels(kind, "200") for kind in ("event", "batch")}


class Endpoint(NamedTuple):
    """What the access log labels a request with (it reads `scope["route"].path`)."""

    path: str


async def read_body(scope: Scope, receive: Receive, max_bytes: int, claim: Claim) -> bytes:
    """The request body, decompressed, or a ProblemError (413, 415, 400, 501, 503).

    The bytes it holds are taken from the budget through `claim` as they arrive (or
    inflate), never on a declared Content-Length alone: a client that sends a head
    declaring 32 MiB and then nothing holds nothing. The caller releases the claim.
    Its time is bounded by the server's request timeout (metastore/http_protocol.py). Raises
    ClientDisconnect when the client goes away (or is cut off) before the end.
    """
    media_type = encoding = declared = transfer = ""
    for name, value in scope["headers"]:  # one pass; header names are lower case in ASGI
        if name == b"content-type":
            media_type = value.decode("latin-1").split(";")[0].strip().lower()
        elif name == b"content-encoding":
            encoding = value.decode("latin-1").strip().lower()
        elif name == b"content-length":
            declared = value.decode("latin-1")
        elif name == b"transfer-encoding":
            transfer += ("," if transfer else "") + value.decode("latin-1")
    if transfer and any(
        c.strip().lower() not in APPLIED_TRANSFER_CODINGS for c in transfer.split(",")
    ):
        raise ProblemError(
            501,
            f"Transfer-Encoding {transfer!r} is not supported: only chunked is applied "
            "(compress the body with Content-Encoding: gzip)",
        )
    if media_type not in JSON_MEDIA_TYPES:
        raise ProblemError(
            415, f"Content-Type {media_type!r} is not supported; send application/json"
        )
    if encoding not in GZIP_ENCODINGS and encoding not in IDENTITY_ENCODINGS:
        raise ProblemError(
            415, f"Content-Encoding {encoding!r} is not supported; send gzip or identity"
        )
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    if encoding in GZIP_ENCODINGS:
        return await _read_gzip(receive, max_bytes, claim)
    return await _read_plain(receive, max_bytes, claim)


async def _chunks(receive: Receive) -> AsyncIterator[bytes]:
    """The body's chunks as they arrive (Starlette's Request.stream, without the Request)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


async def _read_plain(receive: Receive, max_bytes: int, claim: Claim) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in _chunks(receive):
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(max_bytes)
        claim.cover(size)
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_gzip(receive: Receive, max_bytes: int, claim: Claim) -> bytes:
    """Inflates while reading, never more than max_bytes (+1 to notice the excess).

    The claim covers what is inflated so far (the compressed chunks are let go one by one).
    """
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out: list[bytes] = []
    received = produced = 0
    try:
        async for chunk in _chunks(receive):
            received += len(chunk)
            if received > max_bytes:
                raise _too_large(max_bytes)
            data = chunk
            while data:
                piece = inflate.decompress(data, max_bytes - produced + 1)
                produced += len(piece)
                if produced > max_bytes:
                    raise _too_large(max_bytes, after_gzip=True)
                claim.cover(produced)
                out.append(piece)
                if inflate.eof:  # what follows is another gzip member (concatenated gzip)
                    data = inflate.unused_data
                    if data:
                        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                else:
                    data = inflate.unconsumed_tail
        if received and not inflate.eof:
            raise ProblemError(400, "the gzip body is truncated")
    except zlib.error as exc:
        raise ProblemError(400, f"the body is not valid gzip: {exc}") from None
    return b"".join(out)


def _too_large(max_bytes: int, after_gzip: bool = False) -> ProblemError:
    what = "decompressed body" if after_gzip else "request body"
    return ProblemError(413, f"the {what} is larger than the limit of {max_bytes} bytes")


def ingest_endpoint(method: str, path: str) -> str | None:
    """The ingest endpoint (a path of PATHS) that answers a request, or None.

    The aliases answer every method but GET and HEAD on /api/v1/lineage (the read API's
    graph): POST is ingest, the others get a 405 listing the methods of the path.
    """
    if path in PATHS:
        return path
    if path == ALIAS_EVENT_PATH and method in ("GET", "HEAD"):
        return None
    return ALIASES.get(path)


class IngestApp:
    """The two ingest endpoints (PATHS, and their ALIASES) as one ASGI app."""

    def __init__(
        self,
        committer: GroupCommitter,
        settings: Settings,
        budget: InflightBudget,
        authorizer: Authorizer,
    ) -> None:
        self._committer = committer
        self._max_bytes = settings.max_event_bytes
        self._budget = budget
        # None when nothing is configured: ingest then asks nothing (the hot path).
        self._authorizer = authorizer if authorizer.enabled else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        endpoint = ingest_endpoint(scope["method"], path)
        assert endpoint is not None
        scope["route"] = Endpoint(path)
        if scope["method"] != "POST":
            response = problem_response(
                405,
                f"{scope['method']} is not allowed here: POST OpenLineage events to {path}; "
                "the stored events are read back with GET /export/openlineage/events",
                headers={"Allow": "GET, HEAD, POST" if path == ALIAS_EVENT_PATH else "POST"},
            )
            await response(scope, receive, send)
            return
        counted = "event" if endpoint == EVENT_PATH else "batch"
        # Given back once answered: until then the body and its events are held.
        claim = Claim(self._budget)
        try:
            body = await read_body(scope, receive, self._max_bytes, claim)
            INGEST_PAYLOAD_BYTES.observe(len(body))
            principal = principal_of(scope) if self._authorizer is not None else ANONYMOUS
            if endpoint == EVENT_PATH:
                answer = await self._post_event(body, principal)
            else:
                # The batch lets its body go once split into events: held here too, a
                # batch's bytes were in memory twice while it waited for its commit.
                posting = self._post_batch(body, principal)
                del body
                answer = await posting
        except ClientDisconnect:  # the client went away: no one to answer
            return
        except ProblemError as exc:
            INGEST_REQUESTS.labels(counted, str(exc.status)).inc()
            await from_error(exc, instance=path)(scope, receive, send)
            return
        except DATABASE_UNAVAILABLE as exc:
            INGEST_REQUESTS.labels(counted, "503").inc()
            await database_unavailable(exc)(scope, receive, send)
            return
        else:
            _ANSWERED_200[counted].inc()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(answer)).encode()),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
        finally:
            claim.release()

    async def _append(self, records: list[LogRecord]) -> list[str | None]:
        try:
            return await self._committer.append(records)
        except Unavailable as exc:
            raise ProblemError(
                503, f"{exc}; retry later", headers={"Retry-After": RETRY_AFTER_S}
            ) from None
        # psycopg.OperationalError / PoolTimeout propagate: answered 503 + Retry-After.

    async def _post_event(self, body: bytes, principal: Principal) -> bytes:
        try:
            record = parse_event(body)
        except EnvelopeError as exc:
            INGEST_EVENTS.labels("invalid").inc()
            raise ProblemError(exc.status, exc.detail, pointer=exc.pointer) from None
        if self._authorizer is not None:
            await authorize_writes(self._authorizer, principal, [record])
        (refused,) = await self._append([record])
        if refused is not None:
            raise ProblemError(422, refused, pointer="")
        return SUCCESS

    async def _post_batch(self, body: bytes, principal: Principal) -> bytes:
        try:
            elements = split_batch(body)
            del body  # the elements are copies
        except EnvelopeError as exc:
            raise ProblemError(exc.status, exc.detail, pointer=exc.pointer) from None
        failed: list[FailedEvent] = []
        records: list[LogRecord] = []
        indexes: list[int] = []
        for index, text in enumerate(elements):
            if index % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)  # let other requests (and commits) in
            try:
                records.append(parse_element(text))
                indexes.append(index)
            except EnvelopeError as exc:
                where = f"{exc.pointer}: " if exc.pointer else ""
                failed.append(FailedEvent(index, where + exc.detail, False, exc.pointer))
        if failed:
            INGEST_EVENTS.labels("invalid").inc(len(failed))
        if records and self._authorizer is not None:
            await authorize_writes(self._authorizer, principal, records, indexes)
        if records:
            outcomes = await self._append(records)
            for index, refused in zip(indexes, outcomes, strict=True):
                if refused is not None:
                    failed.append(FailedEvent(index, refused, False, ""))
            failed.sort(key=lambda f: f.index)
        summary = BatchSummary(
            received=len(elements),
            successful=len(elements) - len(failed),
            failed=len(failed),
            retriable=0,
            non_retriable=len(failed),
        )
        answer = BatchResult("partial_success" if failed else "success", summary, failed)
        return _encoder.encode(answer)
