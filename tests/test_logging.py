"""Logs of a real `metastore api`: JSON lines or readable text, a line for every request."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import httpx

from metastore.logs import Repeats
from tests.support import start_process
from tests.test_export import FEED

REQUESTS = [
    ("GET", "/healthz", 200),
    ("GET", FEED, 200),
    ("GET", FEED + "?limit=0", 400),
    ("GET", "/no/such/page", 404),
    ("POST", "/ingest/openlineage", 401),
]


def _log_of_requests(database_url: str, tmp_path: Path, log_format: str) -> str:
    """What the api, logging in `log_format`, printed while it answered REQUESTS."""
    env = {"METASTORE_LOG_FORMAT": log_format, "METASTORE_EXPORT_TOKENS": "export-token"}
    api = start_process("api", database_url, tmp_path, env=env)
    try:
        for method, path, status in REQUESTS:
            headers = {"Authorization": "Bearer export-token"} if path.startswith("/export") else {}
            assert httpx.request(method, api.base_url + path, headers=headers).status_code == status
    finally:
        api.stop()
    return api.output()


def test_json_logs_are_one_object_a_line_with_every_request(
    database_url: str, tmp_path: Path
) -> None:
    output = _log_of_requests(database_url, tmp_path, "json")
    lines = [json.loads(line) for line in output.splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= set(doc) for doc in lines)
    requests = [doc for doc in lines if doc["logger"] == "metastore.access"]
    seen = {(doc["method"], doc["path"], doc["status"]) for doc in requests}
    for method, path, status in REQUESTS:
        assert (method, path.split("?")[0], status) in seen
    assert all(isinstance(doc["duration_ms"], float | int) for doc in requests)
    assert all(doc["duration_ms"] >= 0 for doc in requests)
    assert not any("limit=0" in json.dumps(doc) for doc in requests)  # no query strings


def test_text_logs_are_readable_lines_with_every_request(database_url: str, tmp_path: Path) -> None:
    output = _log_of_requests(database_url, tmp_path, "text")
    assert not output.lstrip().startswith("{")
    for method, path, status in REQUESTS:
        pattern = (
            rf"INFO +metastore\.access request method={method} path={re.escape(path.split('?')[0])}"
            rf" status={status} duration_ms=\d+(\.\d+)?"
        )
        assert re.search(pattern, output), (pattern, output)


def test_a_pool_warning_repeated_word_for_word_is_logged_once_in_30_s() -> None:
    """While PostgreSQL is down the pools try to connect every second or two; the process's
    own line that it waits (every 5 s) must not drown in theirs."""
    repeats = Repeats(30.0)

    def record(message: str, at: float) -> logging.LogRecord:
        made = logging.makeLogRecord({"name": "psycopg.pool", "msg": message})
        made.created = at
        return made

    refused = "error connecting in 'metastore-api': connection refused"
    passed = [
        repeats.filter(record(text, at))
        for text, at in [
            (refused, 0.0),
            (refused, 1.0),
            ("error connecting in 'metastore-ingest': connection refused", 1.5),
            (refused, 29.0),
            (refused, 30.5),
        ]
    ]
    assert passed == [True, False, True, False, True]
