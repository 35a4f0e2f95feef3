"""What people say about a job or a dataset (its documentation, ownership and tags facets):
the read models hold it as three columns, description, owners (JSON) and tags (JSON), in
that order, and the detail pages serve it as three fields."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from metastore.api import models

OWNERS = msgspec.json.Decoder(list[models.Owner])
TAGS = msgspec.json.Decoder(list[models.Tag])


def decode(r: Sequence[Any], at: int) -> dict[str, Any]:
    """`description`, `owners` and `tags` of row `r`, whose columns from `at` hold them."""
    return {
        "description": r[at],
        "owners": OWNERS.decode(r[at + 1]),
        "tags": TAGS.decode(r[at + 2]),
    }
