"""Per-job cadence overrides (METASTORE_CADENCE_OVERRIDES): where the cadence learned from a
job's runs is wrong, a file says what it is, or that the job is not to be judged at all.

The file is a JSON list, the first entry matching a job wins:

    [{"namespace": "airflow://prod", "name": "nightly_*", "cadence": "daily",
      "tolerance_seconds": 7200},
     {"namespace": "airflow://*", "name": "legacy_*", "ignore": true}]

`namespace` and `name` are glob patterns (`*` any text, `?` one character). An entry sets
`cadence` (hourly, daily, weekly) or `period_seconds`, and/or `tolerance_seconds`, or
`ignore`. It is applied when read (api/lateness.py, through the read connections' setting
SETTING), so changing it needs a restart of the api, no replay.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from metastore.setting_files import read_text

VARIABLE = "METASTORE_CADENCE_OVERRIDES"
# The read connections' session setting holding the compiled overrides (JSON).
SETTING = "metastore.cadence_overrides"
PERIODS = {"hourly": 3600.0, "daily": 86400.0, "weekly": 604800.0}

Pattern = Annotated[str, Meta(min_length=1, max_length=1024)]
Seconds = Annotated[float, Meta(gt=0, le=366 * 86400)]


class Override(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    namespace: Pattern
    name: Pattern
    cadence: Literal["hourly", "daily", "weekly"] | None = None
    period_seconds: Seconds | None = None
    tolerance_seconds: Seconds | None = None
    ignore: bool = False


class Compiled(msgspec.Struct, frozen=True):
    """An override as SQL reads it: LIKE patterns, the cadence named, seconds."""

    namespace: str
    name: str
    cadence: str | None
    period: float | None
    tolerance: float | None
    ignore: bool


class CadenceFileError(ValueError):
    pass


def like(pattern: str) -> str:
    """A glob pattern as a LIKE pattern (escape `\\`)."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def _compiled(o: Override, where: str) -> Compiled:
    if o.cadence is not None and o.period_seconds is not None:
        raise CadenceFileError(f"{where}: give `cadence` or `period_seconds`, not both")
    if o.ignore and (o.cadence or o.period_seconds or o.tolerance_seconds):
        raise CadenceFileError(f"{where}: `ignore` takes no cadence or tolerance")
    if not o.ignore and not (o.cadence or o.period_seconds or o.tolerance_seconds):
        raise CadenceFileError(
            f"{where}: says nothing: give `cadence`, `period_seconds`, `tolerance_seconds` "
            "or `ignore`"
        )
    period = PERIODS[o.cadence] if o.cadence else o.period_seconds
    cadence: str | None = o.cadence
    if cadence is None and period is not None:
        named = [k for k, v in PERIODS.items() if v == period]
        cadence = named[0] if named else "regular"
    return Compiled(like(o.namespace), like(o.name), cadence, period, o.tolerance_seconds, o.ignore)


def parse(text: str, path: str) -> str | None:
    """The overrides in `text` as the setting's JSON (None: none)."""
    try:
        overrides = msgspec.json.decode(text, type=list[Override])
    except msgspec.ValidationError as exc:
        raise CadenceFileError(f"{VARIABLE}={path!r}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise CadenceFileError(f"{VARIABLE}={path!r} is not JSON: {exc}") from None
    compiled = [_compiled(o, f"{VARIABLE}={path!r} entry {i}") for i, o in enumerate(overrides)]
    return msgspec.json.encode(compiled).decode() if compiled else None


def load(path: str) -> str | None:
    """The overrides in the file at `path` ('' or unset: none) as the setting's JSON."""
    if not path:
        return None
    return parse(read_text(VARIABLE, path, CadenceFileError), path)
