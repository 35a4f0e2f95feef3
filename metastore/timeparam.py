"""Time query parameters as clients send them: a `+` offset that arrived as a space.

`as_of=2026-12-04T00:00:00+00:00` put into a URL without encoding arrives as
`2026-12-04T00:00:00 00:00` (a `+` in a query string means a space). A space before a
trailing `HH:MM` right after the time of day can only have been that `+`, so the read API
and the export feed read it as one.
"""

from __future__ import annotations

import re

_SPACE_OFFSET = re.compile(r"(\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) (\d{2}:\d{2})$")


def plus_for_space(value: str) -> str:
    """`value` with a space before its trailing offset read as the `+` it was."""
    return _SPACE_OFFSET.sub(r"\1+\2", value)
