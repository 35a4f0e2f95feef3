"""A real policy engine behind OPA's data API, for the tests and `make bench`:
`POST /v1/data/{path}` with `{"input": ...}` evaluates the chart's Rego
(deploy/helm/metastore/files/opa/) with PyPI `regopy` and answers `{"result": ...}`, or
`{}` when the rule is undefined, as OPA does.

The policy's data is the module the chart renders from `authorization.policy`
(templates/configmap-opa-bundle.yaml); `userinfo` stands in for the Stackable
user-info-fetcher (data.stackable.opa.userinfo.v1.userInfoByUsername) when given. The
server runs on a thread of the test process (`delay` makes it slow, `stop()` takes it
down), or as a process of its own for the benchmarks:

    python -m bench.opa_server --port 8181 --policy policy.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import regopy
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from metastore.embedded_pg import free_port

REGO = Path(__file__).resolve().parent.parent / "deploy" / "helm" / "metastore" / "files" / "opa"

# The user-info-fetcher's function, answering from the test's map of users to groups.
USERINFO_MODULE = """package stackable.opa.userinfo.v1

import rego.v1

userInfoByUsername(username) := {"id": username, "username": username,
  "groups": object.get(data.test_userinfo, username, [])}
"""


def policy_module(policy: dict[str, Any], package: str = "metastore") -> str:
    """The data module, as templates/configmap-opa-bundle.yaml renders it."""
    return f"package {package}\n\nimport rego.v1\n\npolicy := {json.dumps(policy)}\n"


def chart_modules(policy: dict[str, Any], userinfo: bool = False) -> dict[str, str]:
    """The bundle's Rego files, as the chart ships them in the default package."""
    groups = "groups-userinfo.rego" if userinfo else "groups-identity.rego"
    return {
        "metastore.rego": (REGO / "metastore.rego").read_text(),
        "groups.rego": (REGO / groups).read_text(),
        "policy.rego": policy_module(policy),
    }


class OpaServer:
    """`modules`: the Rego files (name: text) to serve, else the chart's over `policy`."""

    def __init__(
        self,
        policy: dict[str, Any],
        userinfo: dict[str, list[str]] | None = None,
        modules: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.delay = 0.0
        self.asked: list[dict[str, Any]] = []  # every input, in order
        self._interpreter = regopy.Interpreter()
        if modules is None:
            modules = chart_modules(policy, userinfo is not None)
        for name, text in modules.items():
            self._interpreter.add_module(name, text)
        if userinfo is not None:
            self._interpreter.add_module("userinfo.rego", USERINFO_MODULE)
            self._interpreter.add_data_json(json.dumps({"test_userinfo": userinfo}))
        self.app = Starlette(
            routes=[
                Route("/v1/data/{path:path}", self._data, methods=["POST"]),
                Route("/healthz", lambda _: PlainTextResponse("ok")),
            ]
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def evaluate(self, path: str, document: dict[str, Any]) -> dict[str, Any]:
        self._interpreter.set_input(regopy.Input(document["input"]))
        # regopy 1.5.2 answers "undefined" for a rule whose value is its `default`, yet
        # has it in the package's document: the package is evaluated, the rule read.
        *package, rule = path.strip("/").split("/")
        output = self._interpreter.query(".".join(["data", *package]))
        if not output.ok() or str(output) == "undefined":
            return {}
        document = json.loads(str(output))["expressions"][0]
        return {"result": document[rule]} if rule in document else {}

    async def _data(self, request: Request) -> JSONResponse:
        document = await request.json()
        self.asked.append(document["input"])
        if self.delay:
            await asyncio.sleep(self.delay)
        return JSONResponse(self.evaluate(request.path_params["path"], document))

    def start(self) -> None:
        """Serves (again) on the same port."""
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning")
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "the test OPA did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
            self._thread = None


@contextmanager
def opa_server(
    policy: dict[str, Any], userinfo: dict[str, list[str]] | None = None
) -> Iterator[OpaServer]:
    server = OpaServer(policy, userinfo)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="OPA's data API over the chart's Rego")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--policy", type=Path, required=True, help="the policy's JSON")
    args = parser.parse_args()
    server = OpaServer(json.loads(args.policy.read_text()))
    server.port = args.port
    config = uvicorn.Config(server.app, host="127.0.0.1", port=args.port, log_level="warning")
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
