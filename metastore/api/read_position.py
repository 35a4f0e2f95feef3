"""Where the read models stand, as one opaque token, and the ETags made from it.

Every write to the read models commits with a write to `projection_state` in the same
transaction: a folded batch moves its projections' cursors, a rebuild swapped in or a reset
rewrites their rows, and each sets `updated_at`. So the token (a digest of those rows) is
the same exactly when no read model changed in between. An answer computed from the read
models alone (and the request, the caller's access and this release) is then the same too:
its ETag is made from the token, and an unchanged answer's 304 costs this one read of
`projection_state` (a row per projection) instead of the answer's queries.

Answers that also depend on the clock (lateness judged when read, windows ending now) keep
the ETag of their body's bytes (api/responses.py): the token cannot tell they changed.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from metastore import __version__
from metastore.access import access_of
from metastore.api.db import connection, rows

# A request's ETag made from the token (json_response answers with it when set).
ETAG_KEY = "metastore.position_etag"
POSITIONS = """
SELECT name, version, rules, cursor_tx::text, cursor_seq, updated_at FROM projection_state
ORDER BY name"""


async def current(conn: AsyncConnection[Any]) -> str:
    """The read models' position: an opaque token, another after any change to them."""
    digest = hashlib.blake2b(digest_size=16)
    for r in await rows(conn, POSITIONS):
        digest.update(repr(r).encode() + b"\x00")
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 weak comparison against a list of entity tags or `*`."""
    if if_none_match.strip() == "*":
        return True
    bare = etag.removeprefix("W/")
    return any(c.strip().removeprefix("W/") == bare for c in if_none_match.split(","))


async def not_modified(request: Request) -> Response | None:
    """The 304 when the caller's If-None-Match holds this request's ETag at the read models'
    position, without reading them; else None, the ETag kept for the answer. Weak: the
    position is read before the answer, which may be a later one's (the next request then
    answers 200 with the newer tag)."""
    access = await access_of(request)
    async with connection(request) as conn:
        position = await current(conn)
    digest = hashlib.blake2b(digest_size=16)
    for part in (
        position,
        __version__,
        request.method,
        request.url.path,
        request.url.query,
        access.etag_part(),
    ):
        digest.update(part.encode() + b"\x00")
    etag = 'W/"p' + digest.hexdigest() + '"'
    request.scope[ETAG_KEY] = etag
    if_none_match = request.headers.get("if-none-match")
    # (`*` matches any current answer, and an unknown id has none: the handler decides)
    if if_none_match is not None and if_none_match.strip() != "*" and matches(if_none_match, etag):
        return Response(status_code=304, headers={"ETag": etag, "Cache-Control": "no-cache"})
    return None
