"""Logins the database refuses (a wrong password, a role that may not log in, no pg_hba
entry): the process's next login waits 1 s, doubling to 60 s (jittered), instead of every
pool, probe and retry loop trying on its own (134 refused logins a minute, issue 43), and
/readyz names the refusal.

Every connection of `api` and of the projector's loops is made through the gate of its
server and role (`gate`, by URL: a replica refusing does not hold back the primary), with
`connect` or `GatedAsyncConnection`. After a refusal, attempts are refused here, without a
round trip, until the wait is over; then one attempt is let through, and its answer decides
for all.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from typing import Any, Self

import psycopg

from metastore.exit import one_line

log = logging.getLogger("metastore.login")

FIRST_WAIT_S = 1.0
LONGEST_WAIT_S = 60.0
JITTER = 0.2  # each wait is its step times 0.8-1.2, so pods restarted together spread out
# SQLSTATE class 28, invalid authorization: 28P01 a wrong password, 28000 a role that does
# not exist or may not log in, or no pg_hba.conf entry. libpq's connection errors carry no
# SQLSTATE, only the server's message, so the message is what is matched.
REFUSED = re.compile(
    r"FATAL:\s+((?:password|\w+) authentication failed for user .*|no pg_hba\.conf entry .*|"
    r"role .* (?:does not exist|is not permitted to log in))"
)


class LoginRefused(psycopg.OperationalError):
    """Raised instead of a login while the wait after a refused one runs."""


def refusal(exc: BaseException) -> str | None:
    """What the server said when `exc` is a refused login (never a password: the server
    does not repeat it), else None."""
    if isinstance(exc, LoginRefused):
        return None
    match = REFUSED.search(str(exc))
    if match:
        return match.group(1).splitlines()[0].strip()
    if getattr(exc, "sqlstate", None) in ("28P01", "28000"):
        return one_line(exc)
    return None


class LoginGate:
    """The process's logins after a refusal: one at a time, each after a longer wait."""

    def __init__(
        self,
        first_wait: float = FIRST_WAIT_S,
        longest_wait: float = LONGEST_WAIT_S,
        jitter: float = JITTER,
    ) -> None:
        self.first_wait, self.longest_wait, self.jitter = first_wait, longest_wait, jitter
        self._lock = threading.Lock()
        self.reason: str | None = None  # the server's last refusal, while it stands
        self._refusals = 0
        self._retry_at = 0.0
        self._trying = False
        # A refusal counts once per round of attempts: concurrent ones of the same round
        # (the pools opening together) would otherwise wait 2^n s after the first.
        self._round = 0

    def admit(self) -> int:
        """The round this attempt belongs to; raises LoginRefused while the wait runs or
        while another attempt is the one let through."""
        with self._lock:
            if self.reason is not None:
                left = self._retry_at - time.monotonic()
                if left > 0 or self._trying:
                    raise LoginRefused(
                        f"database refused the login: {self.reason} (next attempt in "
                        f"{max(left, 0):.0f} s)"
                    )
                self._trying = True
            return self._round

    def failed(self, exc: BaseException, round_: int) -> None:
        """Records a failed (or cancelled) attempt of `round_`: a refusal makes the next
        wait longer."""
        reason = refusal(exc)
        with self._lock:
            if round_ != self._round:
                return  # a concurrent attempt of a round already counted
            self._trying = False
            if not isinstance(exc, psycopg.OperationalError):
                return  # cancelled (a probe's time was up): the server said nothing
            if reason is None:
                # Unreachable now, say: each caller's own retry applies again.
                self.reason = None
                self._refusals = 0
                return
            self._round += 1
            self._refusals += 1
            step = self.first_wait * 2 ** min(self._refusals - 1, 30)
            wait = min(step, self.longest_wait) * random.uniform(1 - self.jitter, 1 + self.jitter)
            self.reason = reason
            self._retry_at = time.monotonic() + wait
            refusals = self._refusals
        log.warning(
            f"the database refused the login: {reason}; next attempt in {wait:.1f} s",
            extra={"refusals": refusals, "next_attempt_in_s": round(wait, 1)},
        )

    def accepted(self) -> None:
        with self._lock:
            was_refused = self.reason is not None
            if was_refused:
                self.reason, self._refusals, self._trying = None, 0, False
                self._round += 1
        if was_refused:
            log.info("the database accepted the login")

    def unavailable_reason(self) -> str:
        """/readyz's reason when no connection could be had."""
        reason = self.reason
        return f"database refused the login: {reason}" if reason else "database unreachable"


_gates: dict[str, LoginGate] = {}
_gates_lock = threading.Lock()


def gate(conninfo: str) -> LoginGate:
    """The gate of the logins to `conninfo` (a URL: one server, database and role)."""
    with _gates_lock:
        return _gates.setdefault(conninfo, LoginGate())


class HeldBackFilter(logging.Filter):
    """Drops psycopg_pool's line about an attempt a gate held back (no login was tried: the
    refusal was logged once, when the server said it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "database refused the login:" not in record.getMessage()


logging.getLogger("psycopg.pool").addFilter(HeldBackFilter())


def connect(conninfo: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """psycopg.connect through the gate of `conninfo`."""
    logins = gate(conninfo)
    round_ = logins.admit()
    try:
        conn = psycopg.connect(conninfo, **kwargs)
    except BaseException as exc:
        logins.failed(exc, round_)
        raise
    logins.accepted()
    return conn


class GatedAsyncConnection(psycopg.AsyncConnection[Any]):
    """An AsyncConnection whose login goes through the gate of its URL (the API's pools and
    listener)."""

    @classmethod
    async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        logins = gate(conninfo)
        round_ = logins.admit()
        try:
            conn = await super().connect(conninfo, **kwargs)
        except BaseException as exc:
            logins.failed(exc, round_)
            raise
        logins.accepted()
        return conn
