"""POST /ingest/openlineage (one event) and /ingest/openlineage/batch (an array of events).

The body is read with a size limit (METASTORE_MAX_EVENT_BYTES, before and after gzip, so
a gzip bomb stops at the limit), the envelope is checked (metastore/envelope.py), and the
events go to the group committer; the answer is sent only after their commit.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Awaitable, Callable

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from metastore.db import RETRY_AFTER_S
from metastore.envelope import EnvelopeError, parse_batch, parse_event
from metastore.eventlog import LogRecord
from metastore.group_commit import GroupCommitter, Unavailable
from metastore.metrics import INGEST_EVENTS, INGEST_PAYLOAD_BYTES, INGEST_REQUESTS
from metastore.problems import ProblemError

# A missing Content-Type is read as JSON: several emitters (curl scripts, older clients)
# omit it, and the body is checked as JSON anyway. Anything else is 415.
JSON_MEDIA_TYPES = {"", "application/json"}
GZIP_ENCODINGS = {"gzip", "x-gzip"}
IDENTITY_ENCODINGS = {"", "identity"}

SUCCESS = b'{"status":"success"}'


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


async def read_body(request: Request, max_bytes: int, timeout: float) -> bytes:
    """The request body, decompressed, or a ProblemError (413, 415, 400, 408)."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in JSON_MEDIA_TYPES:
        raise ProblemError(
            415, f"Content-Type {media_type!r} is not supported; send application/json"
        )
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding not in GZIP_ENCODINGS and encoding not in IDENTITY_ENCODINGS:
        raise ProblemError(
            415, f"Content-Encoding {encoding!r} is not supported; send gzip or identity"
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    try:
        async with asyncio.timeout(timeout):
            if encoding in GZIP_ENCODINGS:
                return await _read_gzip(request, max_bytes)
            return await _read_plain(request, max_bytes)
    except TimeoutError:
        raise ProblemError(408, f"the request body did not arrive within {timeout:g} s") from None


async def _read_plain(request: Request, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(max_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_gzip(request: Request, max_bytes: int) -> bytes:
    """Inflates while reading, never more than max_bytes (+1 to notice the excess)."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out: list[bytes] = []
    received = produced = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_bytes:
                raise _too_large(max_bytes)
            data = chunk
            while data:
                piece = inflate.decompress(data, max_bytes - produced + 1)
                produced += len(piece)
                if produced > max_bytes:
                    raise _too_large(max_bytes, after_gzip=True)
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


def _unavailable(detail: str) -> ProblemError:
    return ProblemError(503, detail, headers={"Retry-After": RETRY_AFTER_S})


Handler = Callable[[Request], Awaitable[Response]]


def _counted(endpoint: str) -> Callable[[Handler], Handler]:
    """Counts each request of the endpoint by its answer's status."""

    def wrap(handler: Handler) -> Handler:
        async def counted(request: Request) -> Response:
            try:
                response = await handler(request)
            except ProblemError as exc:
                INGEST_REQUESTS.labels(endpoint, str(exc.status)).inc()
                raise
            except Exception:  # database unavailable: the app answers 503
                INGEST_REQUESTS.labels(endpoint, "503").inc()
                raise
            INGEST_REQUESTS.labels(endpoint, str(response.status_code)).inc()
            return response

        return counted

    return wrap


async def _body(request: Request) -> bytes:
    settings = request.app.state.settings
    body = await read_body(request, settings.max_event_bytes, settings.request_timeout)
    INGEST_PAYLOAD_BYTES.observe(len(body))
    return body


async def _append(request: Request, records: list[LogRecord]) -> list[str | None]:
    committer: GroupCommitter = request.app.state.group_committer
    try:
        return await committer.append(records)
    except Unavailable as exc:
        raise _unavailable(f"{exc}; retry later") from None
    # psycopg.OperationalError / PoolTimeout propagate: the app answers 503 + Retry-After.


@_counted("event")
async def post_event(request: Request) -> Response:
    body = await _body(request)
    try:
        record = parse_event(body)
    except EnvelopeError as exc:
        INGEST_EVENTS.labels("invalid").inc()
        raise ProblemError(exc.status, exc.detail, pointer=exc.pointer) from None
    (refused,) = await _append(request, [record])
    if refused is not None:
        raise ProblemError(422, refused, pointer="")
    return Response(SUCCESS, media_type="application/json")


@_counted("batch")
async def post_batch(request: Request) -> Response:
    body = await _body(request)
    try:
        results = parse_batch(body)
    except EnvelopeError as exc:
        raise ProblemError(exc.status, exc.detail, pointer=exc.pointer) from None
    failed: list[FailedEvent] = []
    records: list[LogRecord] = []
    indexes: list[int] = []
    for index, result in enumerate(results):
        if isinstance(result, EnvelopeError):
            where = f"{result.pointer}: " if result.pointer else ""
            failed.append(FailedEvent(index, where + result.detail, False, result.pointer))
        else:
            records.append(result)
            indexes.append(index)
    if failed:
        INGEST_EVENTS.labels("invalid").inc(len(failed))
    if records:
        outcomes = await _append(request, records)
        for index, refused in zip(indexes, outcomes, strict=True):
            if refused is not None:
                failed.append(FailedEvent(index, refused, False, ""))
        failed.sort(key=lambda f: f.index)
    summary = BatchSummary(
        received=len(results),
        successful=len(results) - len(failed),
        failed=len(failed),
        retriable=0,
        non_retriable=len(failed),
    )
    answer = BatchResult("partial_success" if failed else "success", summary, failed)
    return Response(_encoder.encode(answer), media_type="application/json")


routes = [
    Route("/ingest/openlineage", post_event, methods=["POST"]),
    Route("/ingest/openlineage/batch", post_batch, methods=["POST"]),
]
