"""Process-wide logging: one JSON object a line, or readable text."""

from __future__ import annotations

import logging
import re
import sys
import time

import msgspec

# uvicorn adds `color_message` (the message with ANSI colours) to its records: not for logs.
_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}
_LINE_BREAKS = re.compile(r"\s*\n\s*")


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object; `extra=` fields become keys."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return msgspec.json.encode(doc, enc_hook=str).decode()


class TextFormatter(logging.Formatter):
    """`time level logger message key=value ...`"""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        # One line a record (as in JSON): libpq's messages run over several lines.
        return _LINE_BREAKS.sub(" ", super().formatMessage(record))

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [
            f"{k}={v}"
            for k, v in vars(record).items()
            if k not in _RESERVED and not k.startswith("_")
        ]
        return f"{line} {' '.join(extras)}" if extras else line


class Repeats(logging.Filter):
    """Lets a message through once every `seconds` when it repeats word for word: while
    PostgreSQL is down each pool tries to connect every second or two and says so each
    time, which buried the one line a process logs every few seconds that it waits."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.created - self.last.get(text, float("-inf")) < self.seconds:
            return False
        if len(self.last) > 1000:  # the texts name the error: a handful, bounded anyway
            self.last.clear()
        self.last[text] = record.created
        return True


# The connection pools' warnings, repeated while the database is down.
POOL_REPEATS_S = 30.0


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # uvicorn's own access log is replaced by ours (metastore.access), which has the duration.
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True
    logging.getLogger("psycopg.pool").filters[:] = [Repeats(POOL_REPEATS_S)]
