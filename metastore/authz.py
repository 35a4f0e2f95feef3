"""Authorization decisions: which namespaces a principal may read, write, see sensitive
facets of, and whether it may read the export feed.

One interface, `Authorizer`, answered in batches (a request's namespaces in one call, as
Trino's `batch` rule): `OpenAuthorizer` when nothing is configured (everything allowed,
today's behaviour, so `make run` just works), `PolicyAuthorizer` for the chart
values' policy file (metastore.policy) and `OpaAuthorizer` asking the platform's OPA
(metastore.opa), which may raise `AuthorizationUnavailable` (a 503 problem). Callers
never ask per object: reads ask once per request (metastore.access), ingest once per
request for all of its events' namespaces (metastore.write_decision).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol

from metastore.config import Settings
from metastore.opa import OpaAuthorizer
from metastore.policy import Policy
from metastore.principal import Principal

# The operations, as the Rego policy names them (action.operation).
Operation = Literal["ReadNamespace", "ShowSensitive", "WriteNamespace", "ReadExport"]


class Authorizer(Protocol):
    # False: every decision is "allowed" and callers may skip asking (no query, no filter).
    enabled: bool

    async def allowed(
        self, principal: Principal, operation: Operation, namespaces: Iterable[str]
    ) -> frozenset[str]:
        """The namespaces of `namespaces` the principal may do `operation` on."""
        ...

    async def may(self, principal: Principal, operation: Operation) -> bool:
        """A decision without a resource (ReadExport)."""
        ...


class OpenAuthorizer:
    """No authorization configured: everything is allowed."""

    enabled = False

    async def allowed(
        self, principal: Principal, operation: Operation, namespaces: Iterable[str]
    ) -> frozenset[str]:
        return frozenset(namespaces)

    async def may(self, principal: Principal, operation: Operation) -> bool:
        return True


class PolicyAuthorizer:
    """Decisions from the policy file of the chart's values (no OPA)."""

    enabled = True

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    async def allowed(
        self, principal: Principal, operation: Operation, namespaces: Iterable[str]
    ) -> frozenset[str]:
        return frozenset(n for n in namespaces if self.policy.allows(principal, operation, n))

    async def may(self, principal: Principal, operation: Operation) -> bool:
        return self.policy.allows(principal, operation, None)


def authorizer_for(settings: Settings) -> Authorizer:
    if settings.opa is not None:
        return OpaAuthorizer(settings.opa)
    if settings.policy is not None:
        return PolicyAuthorizer(settings.policy)
    return OpenAuthorizer()
