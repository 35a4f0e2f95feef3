"""Whether the live read models are the ones this release's queries read.

Each projection's tables carry the version they were built by (`projection_state.version`);
this release's queries read its projections' `VERSION`s. During an upgrade or a rollback
the live tables are another release's until the projector (or `metastore replay`) swaps
in its rebuild, and a query of this release would fail on a column of the other's
(UndefinedColumn): reads answer 503 `read-models-rebuilding` with Retry-After instead.
`/api/v1/status` is not gated: it is how an operator watches the rebuild.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from psycopg import AsyncConnection

from metastore.db import READ_MODELS_MISSING
from metastore.db import RETRY_AFTER_S as DATABASE_RETRY_AFTER_S
from metastore.problems import ProblemError
from projections.schema import PROJECTIONS

log = logging.getLogger("metastore.api")

# The version of each projection this release's queries read.
EXPECTED: dict[str, int] = {p.NAME: p.VERSION for p in PROJECTIONS}
STORED_VERSIONS = "SELECT name, version FROM projection_state"
# The stored versions are read at most this often per process (a swap is seen within it;
# a query meeting another layout meanwhile is caught by `unreadable`).
RECHECK_S = 1.0
# A rebuild takes minutes (20 at 5,000,000 events): clients need not ask every second.
RETRY_AFTER_S = "10"
# The SQLSTATEs of a query naming what the live tables of another release lack.
OTHER_LAYOUT = (psycopg.errors.UndefinedColumn, psycopg.errors.UndefinedTable)


def other_versions(stored: Mapping[str, int], expected: Mapping[str, int]) -> list[str]:
    """The projections whose live tables are of another version than `expected`."""
    return sorted(name for name, version in expected.items() if stored.get(name) != version)


def rebuilding(detail: str) -> ProblemError:
    return ProblemError(
        503, detail, kind="read-models-rebuilding", headers={"Retry-After": RETRY_AFTER_S}
    )


class ReadModelVersions:
    """One per API process: raises the 503 while the live read models are another
    release's, reading their versions at most every RECHECK_S."""

    def __init__(
        self,
        expected: Mapping[str, int] = EXPECTED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.expected = dict(expected)
        self.clock = clock
        self.checked_at = -RECHECK_S
        self.stored: dict[str, int] = {}
        self.other: list[str] = []  # of `stored`, the projections of another version

    async def require(self, conn: AsyncConnection[Any]) -> None:
        """Raises 503 unless the live read models are the versions this release reads
        (as last read: again when RECHECK_S old)."""
        now = self.clock()
        if now - self.checked_at >= RECHECK_S:
            cur = await conn.execute(STORED_VERSIONS)
            self.stored = {name: version for name, version in await cur.fetchall()}
            self.other = other_versions(self.stored, self.expected)
            self.checked_at = now
        if not self.stored:
            raise ProblemError(
                503, READ_MODELS_MISSING, headers={"Retry-After": DATABASE_RETRY_AFTER_S}
            )
        if self.other:
            shown = ", ".join(
                f"{name} {self.stored.get(name, 'none')} (reads {self.expected[name]})"
                for name in self.other
            )
            raise rebuilding(
                f"the read models are another release's (versions: {shown}); the projector "
                "rebuilds them for this release and swaps them in (GET /api/v1/status shows "
                "its progress); retry later"
            )

    def unreadable(self, exc: psycopg.Error) -> ProblemError:
        """The 503 for a query that met tables of another layout than it reads (a swap
        since the versions were read): they are read again at the next request."""
        self.checked_at = -RECHECK_S
        log.warning("read models of another layout", extra={"error": str(exc).splitlines()[0]})
        return rebuilding(
            "the read-model tables changed under this read (a rebuild of another release was "
            "swapped in, or is being replaced); retry later"
        )
