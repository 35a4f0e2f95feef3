"""Who a request is: the principal the auth middleware found, kept on the ASGI scope.

The middleware (metastore.auth) sets it once per request; everything after it (ingest's
write decision, every read's namespace decision, the export feed) reads it from the scope
with `principal_of`, so identity is resolved in one place and passed as data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from starlette.types import Scope

# "anonymous": no authentication configured (`make run`), "service": a named bearer token
# (an emitter, Cockpit's own credential), "user": a person (an OIDC JWT, or the user a
# service acts for).
Kind = Literal["anonymous", "service", "user"]


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    kind: Kind
    groups: tuple[str, ...] = ()
    # The service principal that acts for this user (Cockpit's token with the user's name
    # in a header): decisions are the user's, the log line names both.
    via: str | None = None


ANONYMOUS = Principal(name="", kind="anonymous")
_SCOPE_KEY = "metastore.principal"


def set_principal(scope: Scope, principal: Principal) -> None:
    scope[_SCOPE_KEY] = principal


def principal_of(scope: Scope) -> Principal:
    principal = scope.get(_SCOPE_KEY, ANONYMOUS)
    assert isinstance(principal, Principal)
    return principal
