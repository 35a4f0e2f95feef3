"""What one read request may see: the namespaces it may read and those whose sensitive
facets (query text, plans) it may see, decided once per request.

Reads are computed over the allowed namespaces (lists, totals, graphs, the export feed),
so a hidden object is absent, never a 403. `None` means every namespace: no
authorization is configured, and reads run exactly today's queries.

The candidates are the namespaces the read models know (readmodel.namespaces, kept for a
second per process): a namespace first seen within that second is not yet in the list
and so not readable for that second, which errs on the side of hiding.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from starlette.requests import Request

from metastore.authz import Authorizer
from metastore.principal import Principal, principal_of

_CANDIDATES_TTL = 1.0
# Where access_of keeps a request's Access (json_response reads it for the ETag).
ACCESS_KEY = "metastore.access"
_NAMESPACES = "SELECT name FROM readmodel.namespaces"


@dataclass(frozen=True, slots=True)
class Access:
    principal: Principal
    readable: frozenset[str] | None  # None: every namespace
    sensitive: frozenset[str] | None  # None: every namespace's sensitive facets

    @property
    def restricted(self) -> bool:
        return self.readable is not None

    def reads(self, namespace: str) -> bool:
        return self.readable is None or namespace in self.readable

    def shows_sensitive(self, namespace: str) -> bool:
        return self.sensitive is None or namespace in self.sensitive

    def sql_params(self) -> dict[str, list[str]]:
        """`%(readable)s` for a query's visibility filter (only added when restricted)."""
        return {"readable": sorted(self.readable or ())}

    def etag_part(self) -> str:
        """A short digest of what this access sees, for ETags: two users seeing different
        things never share a validator."""
        if self.readable is None and self.sensitive is None:
            return ""
        digest = hashlib.sha256()
        for part in (self.readable, self.sensitive):
            digest.update(b"\x00".join(n.encode() for n in sorted(part or ())) + b"\x01")
        return digest.hexdigest()[:16]


EVERYTHING = Access(principal=Principal(name="", kind="anonymous"), readable=None, sensitive=None)


class NamespaceCandidates:
    """The namespaces the read models know, read at most once a second per process."""

    def __init__(self) -> None:
        self._names: tuple[str, ...] = ()
        self._read_at = -_CANDIDATES_TTL

    async def get(self, request: Request) -> tuple[str, ...]:
        if time.monotonic() - self._read_at >= _CANDIDATES_TTL:
            async with request.app.state.pool.connection() as conn:
                cursor = await conn.execute(_NAMESPACES)
                self._names = tuple(name for (name,) in await cursor.fetchall())
            self._read_at = time.monotonic()
        return self._names


async def access_of(request: Request) -> Access:
    """The request's Access, decided on first use and kept on the request."""
    cached = request.scope.get(ACCESS_KEY)
    if isinstance(cached, Access):
        return cached
    authorizer: Authorizer = request.app.state.authorizer
    principal = principal_of(request.scope)
    if not authorizer.enabled or authorizer.sees_everything(principal):
        # (an admin's reads run the unfiltered statements, and see a namespace first seen
        # within the candidates' second)
        access = Access(principal=principal, readable=None, sensitive=None)
    else:
        candidates = await request.app.state.namespace_candidates.get(request)
        readable = await authorizer.allowed(principal, "ReadNamespace", candidates)
        sensitive = await authorizer.allowed(principal, "ShowSensitive", readable)
        access = Access(principal=principal, readable=readable, sensitive=sensitive)
    request.scope[ACCESS_KEY] = access
    return access
