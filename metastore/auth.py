"""Bearer tokens, one scope per API, checked before routing.

`/ingest/...` needs an `ingest` token, and so does a POST to `/api/v1/lineage` and
`/api/v1/lineage/batch` (the same ingest, at the OpenLineage clients' default path);
the rest of `/api/v1/...` (its OpenAPI document included) a `read` token, `/export/...` an
`export` token. `/healthz`, `/readyz`, `/metrics` and every other path are open (an
unknown path answers 404 whoever asks; it serves nothing). No or an unknown token: 401
with `WWW-Authenticate: Bearer`; a token of another scope: 403 saying which paths that
token is for, so a token sent to the wrong place points the user to the right one.

The presented token is compared with every configured token of every scope, with no early
exit, after hashing both sides to the same length, so the time taken says nothing about
how close a guess was. Tokens appear in no log line and no answer.

Each token is a principal (metastore.principal): a named token of METASTORE_TOKENS_FILE
has its name and groups, a token of METASTORE_<SCOPE>_TOKENS is named `<scope>-token`.
The principal is set on the request's scope for the decisions after routing.

When tokens are configured they are enforced, whatever METASTORE_AUTH says; without
tokens, METASTORE_AUTH=disabled opens everything, otherwise every scoped path is refused.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from metastore.config import SCOPES, Settings
from metastore.ingest import ALIASES as INGEST_ALIASES
from metastore.principal import ANONYMOUS, Principal, set_principal
from metastore.problems import problem_response

# (path prefix, scope); a prefix matches itself and anything below it.
SCOPE_PREFIXES = (("/ingest", "ingest"), ("/api/v1", "read"), ("/export", "export"))
_APIS = {"ingest": "ingest API", "read": "read API", "export": "export feed"}
_PATHS_OF = {
    "ingest": "POST /ingest/openlineage or /api/v1/lineage",
    "read": "GET /api/v1/...",
    "export": "GET /export/openlineage/events",
}


def required_scope(path: str, method: str = "GET") -> str | None:
    if method == "POST" and path in INGEST_ALIASES:
        return "ingest"
    for prefix, scope in SCOPE_PREFIXES:
        if path == prefix or path.startswith(prefix + "/"):
            return scope
    return None


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


def _bearer_token(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            token = token.strip()
            if scheme.lower() == b"bearer" and token:
                return token
            return None
    return None


class BearerAuth:
    """ASGI middleware: answers 401/403 itself, passes allowed requests on unchanged."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.enforced = settings.auth_configured or not settings.auth_disabled
        self._tokens = [
            (_digest(token.encode()), scope, Principal(name=f"{scope}-token", kind="service"))
            for scope in SCOPES
            for token in sorted(settings.tokens.get(scope, ()))
        ] + [
            (
                _digest(named.token.encode()),
                scope,
                Principal(name=named.name, kind="service", groups=tuple(named.groups)),
            )
            for named in settings.named_tokens
            for scope in named.scopes
        ]

    async def _not_http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Lifespan passes; any other scope is refused, as nothing may pass unchecked.

        The API serves no WebSocket (uvicorn runs with ws="none"); should one arrive all the
        same, it is closed before it is accepted, which uvicorn answers 403.
        """
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # policy violation
        else:
            raise ValueError(f"unsupported ASGI scope type {scope['type']!r}")

    def scopes_of(self, token: bytes) -> tuple[set[str], Principal]:
        """The scopes the token grants, and the principal it is."""
        presented = _digest(token)
        granted = set()
        principal = ANONYMOUS
        for digest, scope, named in self._tokens:  # all of them, every time
            if hmac.compare_digest(presented, digest):
                granted.add(scope)
                principal = named
        return granted, principal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._not_http(scope, receive, send)
            return
        needed = required_scope(scope["path"], scope["method"])
        if needed is None or not self.enforced:
            await self.app(scope, receive, send)
            return
        api = _APIS[needed]
        token = _bearer_token(scope)
        if token is None:
            response = problem_response(
                401,
                f"the {api} needs a bearer token of scope {needed!r} "
                "(Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": 'Bearer realm="metastore"'},
            )
        else:
            granted, principal = self.scopes_of(token)
            if needed in granted:
                set_principal(scope, principal)
                await self.app(scope, receive, send)
                return
            if not granted:
                response = problem_response(
                    401,
                    "the bearer token is not valid",
                    headers={"WWW-Authenticate": 'Bearer realm="metastore", error="invalid_token"'},
                )
            else:
                token_is_for = " and ".join(
                    f"the {_APIS[s]} ({_PATHS_OF[s]})" for s in SCOPES if s in granted
                )
                response = problem_response(
                    403,
                    f"this bearer token is for {token_is_for}, not for the {api}: "
                    f"{scope['method']} {scope['path']} needs a token of scope {needed!r}",
                    headers={
                        "WWW-Authenticate": 'Bearer realm="metastore", '
                        f'error="insufficient_scope", scope="{needed}"'
                    },
                )
        await response(scope, receive, send)
