"""The OpenLineage Python client configured as an emitter's openlineage.yml would be, for the
tests that deliver through the real client."""

from __future__ import annotations

from typing import Any

from openlineage.client import OpenLineageClient


def openlineage_client(
    url: str, api_key: str, transport: str = "http", **settings: Any
) -> OpenLineageClient:
    """A client of `transport` posting to `url` with `api_key`; `settings` are the
    transport's other keys (endpoint, compression, sslContext, ...)."""
    auth = {"type": "api_key", "apiKey": api_key}
    return OpenLineageClient(
        config={"transport": {"type": transport, "url": url, "auth": auth, **settings}}
    )
