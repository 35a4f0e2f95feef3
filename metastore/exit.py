"""`Exit`: what a command raises to stop with a one-line message and a non-zero status.

Its own module so that the command line (`metastore/cli.py`) and the commands it runs from
other packages (`projections/replay.py`) can both import it without importing each other.
"""


class Exit(Exception):
    """Stop the command with a one-line message and a non-zero status."""

    status = 1


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (libpq's and PostgreSQL's run over several)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
