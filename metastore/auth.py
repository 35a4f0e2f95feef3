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
A bearer JWT matching no token is a user when METASTORE_OIDC_ISSUER is set
(metastore.oidc): a JWT failing a check is a 401 saying which check. A named token with
`act_for_users` (Cockpit) may name the user it acts for in `X-Metastore-User` (and the
user's groups in `X-Metastore-Groups`, comma-separated): the principal is then that user,
`via` the token. From anyone else these headers are a 403, never ignored: a request
meant to be a user's must not be answered as the service's. The principal is set on the
request's scope for the decisions after routing and the access log.

When tokens are configured they are enforced, whatever METASTORE_AUTH says; without
tokens, METASTORE_AUTH=disabled opens everything, otherwise every scoped path is refused.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from metastore.config import SCOPES, Settings
from metastore.ingest import ALIASES as INGEST_ALIASES
from metastore.oidc import InvalidJwt, IssuerUnavailable, OidcUsers, looks_like_jwt
from metastore.principal import ANONYMOUS, Principal, set_principal
from metastore.problems import InvalidParam, problem_response

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


USER_HEADER = "X-Metastore-User"
GROUPS_HEADER = "X-Metastore-Groups"
_ACTING_HEADERS = {h.lower().encode(): h for h in (USER_HEADER, GROUPS_HEADER)}
# A JWT's issuer is retried this many seconds after it could not be reached (metastore.jwks).
_ISSUER_RETRY_AFTER = "10"


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
        # (digest, scope, principal, whether it may act for users)
        self._tokens = [
            (
                _digest(token.encode()),
                scope,
                Principal(name=f"{scope}-token", kind="service"),
                False,
            )
            for scope in SCOPES
            for token in sorted(settings.tokens.get(scope, ()))
        ] + [
            (
                _digest(named.token.encode()),
                scope,
                Principal(name=named.name, kind="service", groups=tuple(named.groups)),
                named.act_for_users,
            )
            for named in settings.named_tokens
            for scope in named.scopes
        ]
        self.oidc = OidcUsers(settings.oidc) if settings.oidc is not None else None

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

    def scopes_of(self, token: bytes) -> tuple[set[str], Principal, bool]:
        """The scopes the token grants, the principal it is, and whether it acts for users."""
        presented = _digest(token)
        granted = set()
        principal = ANONYMOUS
        may_act = False
        for digest, scope, named, acts in self._tokens:  # all of them, every time
            if hmac.compare_digest(presented, digest):
                granted.add(scope)
                principal, may_act = named, acts
        return granted, principal, may_act

    async def _authenticate(self, token: bytes) -> tuple[set[str], Principal, bool] | Response:
        """A token's scopes, principal and acting right; a JWT's when no token matches."""
        granted, principal, may_act = self.scopes_of(token)
        if granted or self.oidc is None or not looks_like_jwt(token):
            return granted, principal, may_act
        try:
            user = await self.oidc.principal(token)
        except InvalidJwt as exc:
            return problem_response(
                401,
                f"the bearer JWT is not valid: {exc}",
                headers={
                    "WWW-Authenticate": 'Bearer realm="metastore", error="invalid_token", '
                    f'error_description="{str(exc).replace(chr(34), chr(39))}"'
                },
            )
        except IssuerUnavailable:  # logged where it failed, with the reason
            return problem_response(
                503,
                "the OIDC issuer's keys cannot be fetched, so the bearer JWT cannot be "
                "checked; retry later",
                headers={"Retry-After": _ISSUER_RETRY_AFTER},
                kind="issuer-unavailable",
            )
        return set(self.oidc.settings.scopes), user, False

    def _acting(self, scope: Scope, principal: Principal, may_act: bool) -> Response | None:
        """Sets the user a service acts for as the principal; a problem when it may not."""
        values: dict[str, bytes] = {}
        for name, value in scope["headers"]:
            if name in _ACTING_HEADERS:
                values[_ACTING_HEADERS[name]] = value
        if not values:
            return None
        if not may_act:
            values = dict(sorted(values.items()))
            who = f"the principal {principal.name!r}" if principal.name else "this request"
            return problem_response(
                403,
                f"{who} may not act for users: {', '.join(sorted(values))} is honoured only "
                "from a named token with act_for_users (the chart's "
                "auth.namedTokens[].actForUsers)",
                invalid_params=[InvalidParam(name=h, reason="not honoured") for h in values],
            )
        try:
            user = values.get(USER_HEADER, b"").decode("utf-8").strip()
            groups = values.get(GROUPS_HEADER, b"").decode("utf-8")
        except UnicodeDecodeError:
            user = ""
        if not user or len(user) > 1024:
            return problem_response(
                400,
                f"{USER_HEADER} must name the user (1-1024 characters of UTF-8)",
                invalid_params=[InvalidParam(name=USER_HEADER, reason="empty or not UTF-8")],
            )
        user_groups = tuple(g.strip() for g in groups.split(",") if g.strip())
        set_principal(
            scope, Principal(name=user, kind="user", groups=user_groups, via=principal.name)
        )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._not_http(scope, receive, send)
            return
        needed = required_scope(scope["path"], scope["method"])
        if needed is None:
            await self.app(scope, receive, send)
            return
        if not self.enforced:
            refused = self._acting(scope, ANONYMOUS, may_act=False)
            if refused is None:
                await self.app(scope, receive, send)
            else:
                await refused(scope, receive, send)
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
            found = await self._authenticate(token)
            if isinstance(found, Response):
                await found(scope, receive, send)
                return
            granted, principal, may_act = found
            if needed in granted:
                set_principal(scope, principal)
                refused = self._acting(scope, principal, may_act)
                if refused is None:
                    await self.app(scope, receive, send)
                else:
                    await refused(scope, receive, send)
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
