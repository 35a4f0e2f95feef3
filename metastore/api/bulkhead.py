"""The read pool's share of the expensive reads (issue 46): graph walks, impact, diffs,
column lineage, search and every `as_of` read take one of a bounded number of slots before
they take a connection, so however many pile up, the rest of the pool is left to the cheap
reads (a namespace list, a job page). A slot is waited for in a bounded queue, at most
as long as a read may run; past either, the read answers 503 `reads-busy` with
Retry-After, at once, instead of holding a client (and a connection) in line.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from metastore.metrics import READS_BUSY
from metastore.problems import ProblemError

RETRY_AFTER_S = "2"


def shares(pool_size: int) -> tuple[int, int]:
    """(slots, queue) of a read pool of `pool_size` connections: half of them (at least
    one) for expensive reads, twice as many waiting."""
    slots = max(1, pool_size // 2)
    return slots, 2 * slots


class Bulkhead:
    def __init__(self, slots: int, queue: int, wait_s: float) -> None:
        self.slots = slots
        self.queue = queue
        self.wait_s = wait_s
        self._free = asyncio.Semaphore(slots)
        self._waiting = 0

    def _busy(self, route: str, why: str) -> ProblemError:
        READS_BUSY.labels(route).inc()
        return ProblemError(
            503,
            f"{why}: graphs, impact, diffs, search and as_of reads share {self.slots} of the "
            "read connections (the others are kept for the cheap reads); retry after "
            "Retry-After, or ask for less",
            headers={"Retry-After": RETRY_AFTER_S},
            kind="reads-busy",
        )

    @contextlib.asynccontextmanager
    async def slot(self, route: str) -> AsyncIterator[None]:
        """A slot of the expensive share, for the block; 503 `reads-busy` when the queue
        is full or the slot did not come in time."""
        if self._free.locked() and self._waiting >= self.queue:
            raise self._busy(
                route, f"{self.slots + self.queue} expensive reads are running or waiting"
            )
        self._waiting += 1
        try:
            await asyncio.wait_for(self._free.acquire(), self.wait_s)
        except TimeoutError:
            raise self._busy(
                route, f"no expensive read finished within {self.wait_s:g} s"
            ) from None
        finally:
            self._waiting -= 1
        try:
            yield
        finally:
            self._free.release()
