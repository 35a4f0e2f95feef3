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

_MEMO_SIZE = 100_000

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

    def sees_everything(self, principal: Principal) -> bool:
        """True when every decision for the principal is known to be "allowed" (an admin of
        the policy file): its reads then run unfiltered, as without authorization."""
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

    def sees_everything(self, principal: Principal) -> bool:
        return True


class PolicyAuthorizer:
    """Decisions from the policy file of the chart's values (no OPA)."""

    enabled = True

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        # The policy never changes in a process: each decision is worked out once (ingest
        # asks the same few on every request), at most _MEMO_SIZE of them, then anew.
        self._memo: dict[tuple[str, tuple[str, ...], str, str], bool] = {}

    async def allowed(
        self, principal: Principal, operation: Operation, namespaces: Iterable[str]
    ) -> frozenset[str]:
        identity = (principal.name, principal.groups, operation)
        allowed = []
        for namespace in namespaces:
            key = (*identity, namespace)
            decision = self._memo.get(key)
            if decision is None:
                if len(self._memo) >= _MEMO_SIZE:
                    self._memo.clear()
                decision = self._memo[key] = self.policy.allows(principal, operation, namespace)
            if decision:
                allowed.append(namespace)
        return frozenset(allowed)

    async def may(self, principal: Principal, operation: Operation) -> bool:
        return self.policy.allows(principal, operation, None)

    def sees_everything(self, principal: Principal) -> bool:
        return self.policy.is_admin(principal)


def authorizer_for(settings: Settings) -> Authorizer:
    if settings.opa is not None:
        return OpaAuthorizer(settings.opa)
    if settings.policy is not None:
        return PolicyAuthorizer(settings.policy)
    return OpenAuthorizer()
