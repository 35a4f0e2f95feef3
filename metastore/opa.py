"""Decisions asked of the platform's OPA, as every Stackable product asks them.

`POST {"input": ...}` to `<OPA>/v1/data/<package>/<rule>` with Trino-shaped input:
`context.identity {user, groups}`, `action.operation`, and either `action.resource` (one
decision, rule `allow`, a boolean) or `action.filterResources` (a batch, rule `batch`,
answering the indices of the resources allowed, as Trino's OPA authorizer asks).

Decisions are cached per identity, operation and namespace (bounded, `cache_seconds`), so
a batch asks only for the namespaces not decided lately. OPA erring, timing out or
answering something else than the rule's type raises `AuthorizationUnavailable` (a 503
problem of its own type: nothing is allowed meanwhile); "undefined" (no `result`, e.g. a
wrong package) is a deny. Both are counted, and OPA's answer time is a histogram.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Iterable, Sequence
from typing import Any

import httpx
import msgspec

from metastore import __version__
from metastore.config import OpaSettings
from metastore.metrics import AUTHZ_CACHE_LOOKUPS, AUTHZ_OPA_FAILURES, AUTHZ_OPA_SECONDS
from metastore.principal import Principal
from metastore.problems import ProblemError

log = logging.getLogger(__name__)
# Labelled once: `labels()` on every decision is a dict lookup and a lock (ingest's hot path).
_HITS = AUTHZ_CACHE_LOOKUPS.labels("hit")
_MISSES = AUTHZ_CACHE_LOOKUPS.labels("miss")

# OpenLineage clients and Cockpit retry a 503 after this many seconds.
RETRY_AFTER_S = "5"


class AuthorizationUnavailable(ProblemError):
    """OPA did not decide: the request is refused, retriable."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            503, detail, kind="authorization-unavailable", headers={"Retry-After": RETRY_AFTER_S}
        )


# (user, groups, operation, namespace or None)
Key = tuple[str, tuple[str, ...], str, str | None]


class DecisionCache:
    """Decisions kept `ttl` seconds, at most `size` of them (the oldest go first)."""

    def __init__(self, ttl: float, size: int) -> None:
        self._ttl = ttl
        self._size = size
        self._entries: dict[Key, tuple[float, bool]] = {}

    def get(self, key: Key, now: float) -> bool | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= now:
            return None
        return entry[1]

    def put(self, key: Key, allowed: bool, now: float) -> None:
        self._entries.pop(key, None)  # re-inserted last: insertion order is age
        self._entries[key] = (now + self._ttl, allowed)
        while len(self._entries) > self._size:
            del self._entries[next(iter(self._entries))]


class _Answer(msgspec.Struct):
    result: Any = msgspec.UNSET


_decode_answer = msgspec.json.Decoder(_Answer)
_encoder = msgspec.json.Encoder()


class OpaAuthorizer:
    """The Authorizer (metastore.authz) whose decisions are OPA's."""

    enabled = True

    def __init__(self, settings: OpaSettings, transport: httpx.AsyncBaseTransport | None = None):
        self.settings = settings
        self._cache = DecisionCache(settings.cache_seconds, settings.cache_size)
        verify: ssl.SSLContext | bool = True
        if settings.ca_file:
            verify = ssl.create_default_context(cafile=settings.ca_file)
        self._client = httpx.AsyncClient(
            timeout=settings.timeout, verify=verify, transport=transport
        )
        self._urls = {rule: settings.rule_url(rule) for rule in ("allow", "batch")}
        # Batches being asked, by (identity, operation, namespaces): requests arriving
        # meanwhile with the same question wait for that answer (after a cache expiry, 64
        # ingest connections ask once, not 64 times).
        self._asking: dict[tuple[object, ...], asyncio.Future[frozenset[int]]] = {}

    async def close(self) -> None:
        await self._client.aclose()

    async def allowed(
        self, principal: Principal, operation: str, namespaces: Iterable[str]
    ) -> frozenset[str]:
        identity = (principal.name, principal.groups)
        now = time.monotonic()
        allowed: set[str] = set()
        undecided: list[str] = []
        looked_up = 0
        for namespace in dict.fromkeys(namespaces):
            looked_up += 1
            decision = self._cache.get((*identity, operation, namespace), now)
            if decision is None:
                undecided.append(namespace)
            elif decision:
                allowed.add(namespace)
        _HITS.inc(looked_up - len(undecided))
        if undecided:
            _MISSES.inc(len(undecided))
            indices = await self._shared_batch(principal, operation, undecided)
            now = time.monotonic()
            for index, namespace in enumerate(undecided):
                self._cache.put((*identity, operation, namespace), index in indices, now)
                if index in indices:
                    allowed.add(namespace)
        return frozenset(allowed)

    def sees_everything(self, principal: Principal) -> bool:
        # OPA's answers are per resource: no principal's reads are known to be unfiltered.
        return False

    async def may(self, principal: Principal, operation: str) -> bool:
        key: Key = (principal.name, principal.groups, operation, None)
        decision = self._cache.get(key, time.monotonic())
        if decision is not None:
            _HITS.inc()
            return decision
        _MISSES.inc()
        result = await self._ask("allow", _input(principal, {"operation": operation}))
        if result is not msgspec.UNSET and not isinstance(result, bool):
            raise self._malformed("allow", result)
        decision = result is True
        self._cache.put(key, decision, time.monotonic())
        return decision

    async def _shared_batch(
        self, principal: Principal, operation: str, namespaces: Sequence[str]
    ) -> frozenset[int]:
        key = (principal.name, principal.groups, operation, tuple(namespaces))
        asking = self._asking.get(key)
        if asking is None:
            asking = asyncio.ensure_future(self._batch(principal, operation, namespaces))
            self._asking[key] = asking
            asking.add_done_callback(lambda _: self._asking.pop(key, None))
        # shielded: one waiter going away (a client disconnecting) cancels no one else's
        return await asyncio.shield(asking)

    async def _batch(
        self, principal: Principal, operation: str, namespaces: Sequence[str]
    ) -> frozenset[int]:
        action = {
            "operation": operation,
            "filterResources": [{"namespace": {"name": n}} for n in namespaces],
        }
        result = await self._ask("batch", _input(principal, action))
        if result is msgspec.UNSET:
            return frozenset()
        if not isinstance(result, list) or not all(
            type(i) is int and 0 <= i < len(namespaces) for i in result
        ):
            raise self._malformed("batch", result)
        return frozenset(result)

    async def _ask(self, rule: str, document: dict[str, Any]) -> Any:
        """OPA's `result` for the rule, or UNSET when it is undefined."""
        url = self._urls[rule]
        started = time.perf_counter()
        try:
            answer = await self._client.post(
                url, content=_encoder.encode(document), headers={"content-type": "application/json"}
            )
            answer.raise_for_status()
            result = _decode_answer.decode(answer.content).result
        except httpx.TimeoutException:
            AUTHZ_OPA_FAILURES.labels("timeout").inc()
            log.warning("OPA did not answer %s within %g s", url, self.settings.timeout)
            raise AuthorizationUnavailable(
                f"the authorization service (OPA) did not answer within "
                f"{self.settings.timeout:g} s; nothing is allowed meanwhile, retry later"
            ) from None
        except (httpx.HTTPError, msgspec.DecodeError) as exc:
            AUTHZ_OPA_FAILURES.labels("error").inc()
            log.warning("OPA failed to answer %s: %s", url, exc)
            raise AuthorizationUnavailable(
                "the authorization service (OPA) failed to answer; nothing is allowed "
                "meanwhile, retry later"
            ) from None
        finally:
            AUTHZ_OPA_SECONDS.labels(rule).observe(time.perf_counter() - started)
        if result is msgspec.UNSET:
            AUTHZ_OPA_FAILURES.labels("undefined").inc()
            log.warning("OPA answered undefined for %s (denied): is the package right?", url)
        return result

    def _malformed(self, rule: str, result: Any) -> AuthorizationUnavailable:
        AUTHZ_OPA_FAILURES.labels("error").inc()
        log.warning("OPA's %s answered %.200r, not the rule's type", self._urls[rule], result)
        expected = "a boolean" if rule == "allow" else "a list of indices"
        return AuthorizationUnavailable(
            f"the authorization policy's `{rule}` rule answered something else than "
            f"{expected}; nothing is allowed until it is fixed"
        )


def _input(principal: Principal, action: dict[str, Any]) -> dict[str, Any]:
    return {
        "input": {
            "context": {
                "identity": {"user": principal.name, "groups": list(principal.groups)},
                "softwareStack": {"metastoreVersion": __version__},
            },
            "action": action,
        }
    }
