"""The issuer's keys (metastore.jwks) against a real local issuer: old keys are replaced
without making anyone wait, and an issuer that hangs delays a JWT by a bounded time."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metastore import jwks
from metastore.jwks import IssuerUnavailable, SigningKeys
from tests.oidc_issuer import Issuer, running_issuer


@pytest.fixture
def issuer(tmp_path: Path) -> Iterator[Issuer]:
    with running_issuer(tmp_path) as issuer:
        yield issuer


@pytest.fixture
def hanging_url() -> Iterator[str]:
    """An issuer that takes connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/realms/platform"


def _keys(issuer: Issuer) -> SigningKeys:
    return SigningKeys(issuer.url, ssl.create_default_context(cafile=str(issuer.ca_file)))


def test_old_keys_serve_while_fresh_ones_are_fetched(
    issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        keys = _keys(issuer)
        assert (await keys.key("key-1")) is not None
        monkeypatch.setattr(jwks, "MAX_AGE", 0.0)
        issuer.rotate("key-2")
        # past MAX_AGE the held key still answers, and a fetch starts behind it
        assert (await keys.key("key-1")) is not None
        await asyncio.sleep(0.5)
        assert issuer.jwks_fetches == 2
        monkeypatch.setattr(jwks, "MAX_AGE", 600.0)
        assert (await keys.key("key-2")) is not None  # no further fetch needed
        assert (await keys.key("key-1")) is None  # the issuer dropped it (looked for once)
        assert (await keys.key("key-1")) is None
        assert issuer.jwks_fetches == 3

    asyncio.run(scenario())


def test_an_issuer_that_hangs_delays_a_jwt_a_bounded_time(
    hanging_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jwks, "FETCH_TIMEOUT", 0.5)

    async def scenario() -> None:
        keys = SigningKeys(hanging_url, ssl.create_default_context())
        started = time.monotonic()
        with pytest.raises(IssuerUnavailable, match="cannot be reached"):
            await keys.key("key-1")
        assert time.monotonic() - started < 3
        # within MIN_REFRESH a second JWT is answered at once, without another attempt
        started = time.monotonic()
        with pytest.raises(IssuerUnavailable):
            await keys.key("key-1")
        assert time.monotonic() - started < 0.1

    asyncio.run(scenario())
