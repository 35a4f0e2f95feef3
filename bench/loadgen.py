"""Load generators: wrk (C, for the closed-loop single-event figure) and a lean asyncio one.

On 2 cores the client competes with the server for CPU, so the client has to be cheap:
the single-event figure uses wrk with one thread (a Lua script builds each body from a
pre-split template, so every request is a distinct event), and falls back to the asyncio
generator only when wrk is not installed. The asyncio generator speaks HTTP/1.1 keep-alive
over raw asyncio streams on uvloop (no HTTP library per request) and is used where the
request rate is low (batches, the fixed-rate lag run, sequential read queries). The CPU
the client used is measured (wrk: rusage of the child; asyncio: our process time) and
reported beside each figure, and the same client drives the baseline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import msgspec

JSON_HEADERS = {"Content-Type": "application/json"}
# How the report names each client (the `client` column of docs/BENCHMARKS.md).
WRK = "wrk -t1"
ASYNCIO_CLIENT = "asyncio client (bench/loadgen.py)"


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class LoadResult:
    requests: int  # answered 2xx
    errors: int  # not 2xx, or failed
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)  # empty with wrk
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    client_cpu_s: float = 0.0
    tool: str = ""

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


# --------------------------------------------------------------------------- wrk

WRK_SCRIPT = r"""
local head = [==[%(head)s]==]
local tail = [==[%(tail)s]==]
local salt = %(salt)d
local threads = 0
local counter = 0
local tid = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function request()
  counter = counter + 1
  local body = head .. string.format("%%01x%%03x%%08x", tid, salt, counter) .. tail
  return wrk.format("POST", "%(path)s", {["Content-Type"] = "application/json"%(auth)s}, body)
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKJSON{\"requests\":%%d,\"duration_us\":%%d,\"status\":%%d,\"connect\":%%d," ..
    "\"read\":%%d,\"write\":%%d,\"timeout\":%%d,\"p50_us\":%%d,\"p99_us\":%%d}\n",
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def wrk_post(
    base_url: str,
    path: str,
    head: bytes,
    tail: bytes,
    connections: int,
    seconds: float,
    salt: int,
    token: str | None = None,
) -> LoadResult:
    """Closed loop: `connections` connections POST distinct events for `seconds` (with
    `token` as their bearer token)."""
    auth = f', ["Authorization"] = "Bearer {token}"' if token else ""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(
            WRK_SCRIPT
            % {
                "head": head.decode(),
                "tail": tail.decode(),
                "salt": salt % 4096,
                "path": path,
                "auth": auth,
            }
        )
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                "--latency",
                "--timeout",
                "10s",
                "-s",
                script.name,
                base_url,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        Path(script.name).unlink()
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("WRKJSON")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed: {proc.stdout[-1000:]} {proc.stderr[-1000:]}")
    data = json.loads(line[len("WRKJSON") :])
    failed = data["status"] + data["connect"] + data["read"] + data["write"] + data["timeout"]
    return LoadResult(
        requests=data["requests"] - data["status"],
        errors=failed,
        seconds=data["duration_us"] / 1e6,
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        client_cpu_s=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        tool=WRK,
    )


# ------------------------------------------------------------------ asyncio client


class HttpConnection:
    """One keep-alive HTTP/1.1 connection; enough of the protocol for our own servers."""

    def __init__(self, host: str, port: int, token: str | None = None) -> None:
        self.host, self.port = host, port
        self.authorization = f"Authorization: Bearer {token}\r\n" if token else ""
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
            self.writer = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            await self.open()
        assert self.reader is not None and self.writer is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Length: {len(body)}\r\n{self.authorization}"
        )
        if body:
            head += "Content-Type: application/json\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        if "content-length" in headers:
            payload = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            payload = await self._chunked()
        else:
            payload = b""
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, payload

    async def _chunked(self) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)


def _host_port(base_url: str) -> tuple[str, int]:
    host_port = base_url.split("://", 1)[1].rstrip("/")
    host, _, port = host_port.partition(":")
    return host, int(port)


def _run(coro_factory: Callable[[], object]) -> object:
    try:
        import uvloop

        return uvloop.run(coro_factory())  # type: ignore[arg-type]
    except ImportError:
        return asyncio.run(coro_factory())  # type: ignore[arg-type]


def closed_loop(
    base_url: str,
    path: str,
    make_body: Callable[[int], bytes],
    connections: int,
    count: int | None = None,
    seconds: float | None = None,
    check: Callable[[bytes], bool] | None = None,
    token: str | None = None,
) -> LoadResult:
    """`connections` connections POST body 0, 1, 2, ... until `count` or `seconds`.

    `check` looks at each 2xx response body (a batch answer can be a partial success).
    """
    host, port = _host_port(base_url)
    latencies: list[float] = []
    errors = 0
    next_index = 0
    limit = count if count is not None else 2**62

    async def worker(deadline: float) -> None:
        nonlocal next_index, errors
        conn = HttpConnection(host, port, token)
        try:
            while next_index < limit and time.perf_counter() < deadline:
                body = make_body(next_index)
                next_index += 1
                t0 = time.perf_counter()
                try:
                    status, payload = await conn.request("POST", path, body)
                except (OSError, asyncio.IncompleteReadError):
                    await conn.close()
                    errors += 1
                    continue
                if 200 <= status < 300 and (check is None or check(payload)):
                    latencies.append((time.perf_counter() - t0) * 1000)
                else:
                    errors += 1
        finally:
            await conn.close()

    async def main() -> float:
        t0 = time.perf_counter()
        deadline = t0 + seconds if seconds is not None else float("inf")
        await asyncio.gather(*(worker(deadline) for _ in range(connections)))
        return time.perf_counter() - t0

    cpu0 = time.process_time()
    elapsed = _run(main)
    assert isinstance(elapsed, float)
    return LoadResult(
        requests=len(latencies),
        errors=errors,
        seconds=elapsed,
        latencies_ms=latencies,
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        client_cpu_s=time.process_time() - cpu0,
        tool=ASYNCIO_CLIENT,
    )


@dataclass
class Timed:
    index: int
    sent: float  # perf_counter when it was due
    acked: float  # perf_counter when the 2xx arrived (nan if it failed)


async def open_loop(
    base_url: str,
    path: str,
    make_body: Callable[[int], bytes],
    rate: float,
    seconds: float,
    max_connections: int = 64,
) -> list[Timed]:
    """Open loop: request i is due at start + i/rate, whatever the server's pace.

    A free connection takes the next due request; when all are busy a new one opens (up
    to max_connections), so a slow server shows as latency, not as a lower offered rate.
    """
    host, port = _host_port(base_url)
    total = int(rate * seconds)
    idle: list[HttpConnection] = []
    opened = 0
    results: list[Timed] = []
    inflight: set[asyncio.Task[None]] = set()

    async def send(i: int, due: float, conn: HttpConnection) -> None:
        try:
            status, _ = await conn.request("POST", path, make_body(i))
            acked = time.perf_counter() if 200 <= status < 300 else float("nan")
        except (OSError, asyncio.IncompleteReadError):
            await conn.close()
            acked = float("nan")
        results.append(Timed(i, due, acked))
        idle.append(conn)

    start = time.perf_counter()
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if idle:
            conn = idle.pop()
        elif opened < max_connections:
            conn = HttpConnection(host, port)
            opened += 1
        else:
            while not idle:
                await asyncio.sleep(0.001)
            conn = idle.pop()
        task = asyncio.ensure_future(send(i, due, conn))
        inflight.add(task)
        task.add_done_callback(inflight.discard)
    if inflight:
        await asyncio.gather(*inflight)
    for conn in idle:
        await conn.close()
    return sorted(results, key=lambda t: t.index)


@dataclass
class Answers:
    latencies_ms: list[float]
    statuses: list[int]
    bodies: list[bytes]
    paths: list[str] = field(default_factory=list)


class Session:
    """A synchronous face on one keep-alive connection, for requests one at a time."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.loop: asyncio.AbstractEventLoop
        try:
            import uvloop

            self.loop = uvloop.new_event_loop()
        except ImportError:
            self.loop = asyncio.new_event_loop()
        self.conn = HttpConnection(*_host_port(base_url), token)

    async def _get(self, path: str) -> tuple[float, int, bytes]:
        t0 = time.perf_counter()
        status, body = await self.conn.request("GET", path)
        return (time.perf_counter() - t0) * 1000, status, body

    def get(self, path: str) -> tuple[float, int, bytes]:
        """(latency ms, status, body) of one GET."""
        return self.loop.run_until_complete(self._get(path))

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


T = TypeVar("T")


def get_warm(base_url: str, paths: Sequence[str], kind: type[T]) -> tuple[Answers, list[T]]:
    """GETs the first 10 paths (a warm-up), then all of them timed; with the 200 answers
    decoded as `kind`."""
    get_many(base_url, paths[:10])
    answers = get_many(base_url, paths)
    ok = [
        msgspec.json.decode(b, type=kind)
        for st, b in zip(answers.statuses, answers.bodies, strict=True)
        if st == 200
    ]
    return answers, ok


def get_many(base_url: str, paths: Sequence[str], token: str | None = None) -> Answers:
    """GETs the paths one after another on one keep-alive connection."""
    session = Session(base_url, token)
    answers = Answers([], [], [])
    try:
        for path in paths:
            ms, status, body = session.get(path)
            answers.latencies_ms.append(ms)
            answers.statuses.append(status)
            answers.bodies.append(body)
    finally:
        session.close()
    return answers
