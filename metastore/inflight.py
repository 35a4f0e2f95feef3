"""The API process's budget of request bytes in flight (METASTORE_MAX_INFLIGHT_BYTES).

METASTORE_MAX_EVENT_BYTES bounds one request; this bounds them all together, so memory
follows the bytes held rather than the number of requests: 32 concurrent 32 MB batches took
the API to 2.5 GB before. An ingest request takes its bytes from the budget as they arrive
(as they inflate, for gzip) and gives them back when it has been answered. Not on the
declared Content-Length: four clients that sent heads declaring 32 MiB and then nothing
held the whole default budget, and every other ingest request was refused. A request
that does not fit is answered 503 with Retry-After, which the OpenLineage clients retry;
the rest of its body is discarded unread.

A plain counter: the event loop runs one request at a time between awaits, so taking and
giving back need no lock (measured: under 0.1 µs a request).
"""

from __future__ import annotations

from dataclasses import dataclass

from metastore.problems import ProblemError

# Bytes in flight drain as fast as requests commit (a maximal batch in about a second).
RETRY_AFTER_S = "1"


@dataclass(slots=True, eq=False)
class InflightBudget:
    """Bytes of request bodies held by this process's requests, against a limit."""

    limit: int
    held: int = 0

    def take(self, size: int) -> None:
        """Holds `size` more bytes, or raises the 503 ProblemError when they do not fit."""
        held = self.held + size
        if held > self.limit:
            raise ProblemError(
                503,
                f"the server holds {self.held} request bytes of its budget of {self.limit} "
                "(METASTORE_MAX_INFLIGHT_BYTES); retry later",
                headers={"Retry-After": RETRY_AFTER_S},
            )
        self.held = held

    def give_back(self, size: int) -> None:
        self.held -= size


@dataclass(slots=True, eq=False)
class Claim:
    """What one request holds of the budget; it grows with the body, and is given back once."""

    budget: InflightBudget
    size: int = 0

    def cover(self, size: int) -> None:
        """Holds `size` bytes in all (more than before, or nothing changes)."""
        if size > self.size:
            self.budget.take(size - self.size)
            self.size = size

    def release(self) -> None:
        self.budget.give_back(self.size)
        self.size = 0
