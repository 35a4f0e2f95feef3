"""The OIDC issuer's signing keys: found by discovery, cached, refreshed when needed.

`<issuer>/.well-known/openid-configuration` names the issuer (what a JWT's `iss` must be)
and its `jwks_uri`; the keys there are kept by key id. They are fetched again when older
than MAX_AGE (a key the issuer dropped stops verifying), and when a JWT names a key id we
do not hold (the issuer rotated its key), at most once every MIN_REFRESH seconds, so JWTs
with made-up key ids cannot make us hammer the issuer. A failed fetch is not retried for
MIN_REFRESH either; meanwhile the keys we hold serve, and without any a JWT cannot be
checked (IssuerUnavailable, a 503).

Fetches use urllib in a thread (rare, so no HTTP client dependency), bounded in time and
size, one at a time: requests arriving during a fetch wait for its keys.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

import jwt

log = logging.getLogger("metastore.oidc")

FETCH_TIMEOUT = 5.0  # seconds per connect and read of one document
MAX_DOCUMENT_BYTES = 1 << 20
MAX_AGE = 600.0
MIN_REFRESH = 10.0
MAX_KEYS = 100  # an issuer publishes a few; more is a mistake we do not hold in memory
_NEVER = float("-inf")


class IssuerUnavailable(Exception):
    """The issuer's discovery document or keys could not be fetched; says what failed."""


def _get_json(url: str, context: ssl.SSLContext) -> dict[str, Any]:
    request = urllib.request.Request(
        url, headers={"Accept": "application/json", "User-Agent": "metastore"}
    )
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT, context=context) as answer:
            body = answer.read(MAX_DOCUMENT_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise IssuerUnavailable(f"{url} answered {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise IssuerUnavailable(f"{url} cannot be reached: {reason}") from None
    if len(body) > MAX_DOCUMENT_BYTES:
        raise IssuerUnavailable(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
    try:
        value = json.loads(body)
    except ValueError:
        raise IssuerUnavailable(f"{url} did not answer JSON") from None
    if not isinstance(value, dict):
        raise IssuerUnavailable(f"{url} did not answer a JSON object")
    return value


def _signing_keys(jwks: dict[str, Any], url: str) -> dict[str | None, jwt.PyJWK]:
    keys: dict[str | None, jwt.PyJWK] = {}
    entries = jwks.get("keys")
    if not isinstance(entries, list):
        raise IssuerUnavailable(f"{url} has no `keys` list")
    for entry in entries[:MAX_KEYS]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue  # encryption keys verify nothing
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError) as exc:
            log.warning("oidc key skipped", extra={"kid": entry.get("kid"), "reason": str(exc)})
            continue
        keys[key.key_id] = key
    return keys


class SigningKeys:
    def __init__(self, issuer_url: str, context: ssl.SSLContext) -> None:
        self.issuer_url = issuer_url
        self._context = context
        self.issuer: str | None = None  # as the discovery document names it
        self._jwks_uri: str | None = None
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at = _NEVER
        self._failed_at = _NEVER
        self._unknown_kid_at = _NEVER
        self._error = "the issuer's keys were not fetched yet"
        self._lock = asyncio.Lock()
        self._generation = 0  # fetch attempts, so a waiter sees that one ran meanwhile
        self._aging: asyncio.Task[None] | None = None  # the refresh of keys past MAX_AGE

    def _fetch(self) -> tuple[str, str, dict[str | None, jwt.PyJWK]]:
        issuer, jwks_uri = self.issuer, self._jwks_uri
        if issuer is None or jwks_uri is None:
            url = self.issuer_url + "/.well-known/openid-configuration"
            discovery = _get_json(url, self._context)
            issuer, jwks_uri = discovery.get("issuer"), discovery.get("jwks_uri")
            if not isinstance(issuer, str) or issuer.rstrip("/") != self.issuer_url:
                raise IssuerUnavailable(
                    f"{url} names the issuer {issuer!r}, not {self.issuer_url!r} "
                    "(METASTORE_OIDC_ISSUER)"
                )
            if not isinstance(jwks_uri, str):
                raise IssuerUnavailable(f"{url} has no jwks_uri")
        return issuer, jwks_uri, _signing_keys(_get_json(jwks_uri, self._context), jwks_uri)

    async def _refresh(self, generation: int, unknown_kid: bool) -> None:
        async with self._lock:
            now = time.monotonic()
            if (
                generation != self._generation  # fetched while this request waited
                or now - self._failed_at < MIN_REFRESH
                or (unknown_kid and now - self._unknown_kid_at < MIN_REFRESH)
            ):
                return
            self._generation += 1
            if unknown_kid:
                self._unknown_kid_at = now
            try:
                # urllib's timeout is per socket operation: bound the whole fetch too
                self.issuer, self._jwks_uri, self._keys = await asyncio.wait_for(
                    asyncio.to_thread(self._fetch), timeout=4 * FETCH_TIMEOUT
                )
            except (IssuerUnavailable, TimeoutError) as exc:
                self._failed_at = time.monotonic()
                self._error = str(exc) or f"{self.issuer_url} did not answer in time"
                log.warning("oidc keys not fetched", extra={"reason": self._error})
                return
            self._fetched_at = time.monotonic()
            log.info("oidc keys fetched", extra={"kids": sorted(map(str, self._keys))})

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The issuer's key of that id (None: no such key); IssuerUnavailable without keys."""
        if not self._keys:
            await self._refresh(self._generation, unknown_kid=False)
            if not self._keys:
                raise IssuerUnavailable(self._error)
        elif time.monotonic() - self._fetched_at > MAX_AGE and self._aging is None:
            # Old keys serve while fresh ones are fetched: an issuer that hangs delays no one.
            self._aging = asyncio.create_task(self._refresh(self._generation, unknown_kid=False))
            self._aging.add_done_callback(self._aged)
        found = self._find(kid)
        if found is None:
            await self._refresh(self._generation, unknown_kid=True)
            found = self._find(kid)
        return found

    def _aged(self, task: asyncio.Task[None]) -> None:
        self._aging = None

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))  # an issuer with one key may omit ids
        return self._keys.get(kid)
