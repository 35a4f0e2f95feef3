"""JSON answers with an ETag, honouring If-None-Match (304 without a body).

The ETag covers the request's Access when its read decided one (access_of): two users
who may see different things never share a validator, even for equal bodies (a 304 to one
must not confirm what the other's cached answer holds). An operation whose answer the read
models' position determines has its ETag made from that position instead
(api/read_position.py), set before its handler runs.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import ACCESS_KEY, Access
from metastore.api.read_position import ETAG_KEY, matches

_encoder = msgspec.json.Encoder()


def etag_of(body: bytes, access_part: str = "") -> str:
    """A strong validator: the hash of the exact body bytes (and of Access.etag_part)."""
    digest = hashlib.blake2b(body, digest_size=16)
    if access_part:
        digest.update(b"\x00access:" + access_part.encode())
    return '"' + digest.hexdigest() + '"'


def json_response(
    request: Request, value: Any, *, media_type: str = "application/json"
) -> Response:
    body = value if isinstance(value, bytes) else _encoder.encode(value)
    access = request.scope.get(ACCESS_KEY)
    etag = request.scope.get(ETAG_KEY) or etag_of(
        body, access.etag_part() if isinstance(access, Access) else ""
    )
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)
