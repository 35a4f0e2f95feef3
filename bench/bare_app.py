"""The baseline of single-event ingest: a bare Starlette route that only msgspec-decodes.

Served by uvicorn exactly as `metastore api` serves the real app (metastore/cli.py
`cmd_api`: one process, uvicorn's default loop, uvloop when installed, the same HTTP
protocol (metastore/http_protocol.py) and keep-alive), so the ratio is the cost of what
ingest adds: envelope checks, the digest, group commit and the durable COMMIT.
Run: BENCH_PORT=8081 python -m bench.bare_app
"""

from __future__ import annotations

import os

import msgspec
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from metastore.http_protocol import api_http_protocol

SUCCESS = b'{"status":"success"}'


async def post_event(request: Request) -> Response:
    msgspec.json.decode(await request.body())
    return Response(SUCCESS, media_type="application/json")


async def healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


app = Starlette(
    routes=[
        Route("/ingest/openlineage", post_event, methods=["POST"]),
        Route("/healthz", healthz),
    ]
)

if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(os.environ["BENCH_PORT"]),
        log_config=None,
        access_log=False,
        proxy_headers=True,
        timeout_keep_alive=15,
        timeout_graceful_shutdown=10,
        http=api_http_protocol(30.0),  # METASTORE_REQUEST_TIMEOUT's default
    )
