"""Reading the file a setting names (the catalog map, the cadence overrides)."""

from __future__ import annotations

from pathlib import Path


def read_text(variable: str, path: str, error: type[ValueError]) -> str:
    """The UTF-8 text of the file at `path` that `variable` names, else `error` saying why
    not in one line naming both."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{variable}={path!r} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise error(f"{variable}={path!r} is not UTF-8 text") from None
