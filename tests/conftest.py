"""Fixtures: a real PostgreSQL for the session, a fresh database (a template copy) per test.

METASTORE_TEST_DATABASE_URL points the suite at an existing server (its user needs
CREATEDB); otherwise the session starts a throwaway server (as an unprivileged user when
we are root) and removes it at the end.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from pytest_postgresql.janitor import DatabaseJanitor

from metastore.embedded_pg import EmbeddedPostgres
from metastore.migrations import apply_migrations
from tests.support import Process, ReadmeInstall, running

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = ROOT.parent / "shared" / "conformance"
# One template a pytest-xdist worker (PYTEST_XDIST_WORKER: gw0, gw1, ...): on a server given
# by METASTORE_TEST_DATABASE_URL the workers share, each drops and makes its own.
TEMPLATE_DB = "metastore_test_template_" + os.environ.get("PYTEST_XDIST_WORKER", "main")


class Server:
    """Where the test PostgreSQL is, and how to make a URL for one of its databases."""

    def __init__(self, url: str, embedded: EmbeddedPostgres | None) -> None:
        parts = urlsplit(url)
        self.parts = parts
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 5432
        self.user = parts.username or "postgres"
        self.password = parts.password
        self.embedded = embedded

    def url(self, dbname: str) -> str:
        return urlunsplit(self.parts._replace(path="/" + dbname))

    def janitor(self, dbname: str, **kwargs: Any) -> DatabaseJanitor:
        return DatabaseJanitor(
            user=self.user,
            host=self.host,
            port=self.port,
            password=self.password,
            dbname=dbname,
            **kwargs,
        )

    @contextmanager
    def database(self, prefix: str, template: str | None = None) -> Iterator[str]:
        """A new database (a copy of `template`, else empty), dropped on leaving; its URL."""
        janitor = self.janitor(
            f"{prefix}_{os.getpid()}_{next(_db_counter)}", template_dbname=template
        )
        janitor.init()
        try:
            yield self.url(janitor.dbname)
        finally:
            janitor.drop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    given = os.environ.get("METASTORE_TEST_DATABASE_URL")
    if given:
        yield Server(given, None)
        return
    embedded = EmbeddedPostgres(
        Path(tempfile.mkdtemp(prefix="metastore-test-", dir="/tmp")), fast_unsafe=True
    )
    try:
        url = embedded.start()
        yield Server(url, embedded)
    finally:
        embedded.destroy()


def prepare_template(url: str) -> None:
    """Everything a fresh database needs: migrations, then the read-model tables."""
    apply_migrations(url)
    try:
        from projections.schema import create_readmodel_tables
    except ImportError:  # the projector's tables arrive with the projector
        return
    with psycopg.connect(url) as conn:
        create_readmodel_tables(conn)


@pytest.fixture(scope="session")
def template_db(pg_server: Server) -> Iterator[str]:
    janitor = pg_server.janitor(TEMPLATE_DB)
    janitor.drop()
    janitor.init()
    prepare_template(pg_server.url(TEMPLATE_DB))
    yield TEMPLATE_DB
    janitor.drop()


_db_counter = itertools.count()


@pytest.fixture
def database_url(pg_server: Server, template_db: str) -> Iterator[str]:
    """A fresh, migrated database for this test alone."""
    with pg_server.database("t", template_db) as url:
        yield url


@pytest.fixture(scope="module")
def module_database(pg_server: Server, template_db: str) -> Iterator[str]:
    """A fresh, migrated database the tests of one module share."""
    with pg_server.database("m", template_db) as url:
        yield url


@pytest.fixture
def api(database_url: str, tmp_path: Path) -> Iterator[Process]:
    """`metastore api` on this test's database, no tokens (a module may define its own)."""
    with running("api", database_url, tmp_path) as process:
        yield process


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def empty_database_url(pg_server: Server) -> Iterator[str]:
    """A fresh database with no schema at all (for migration tests)."""
    with pg_server.database("e") as url:
        yield url


@pytest.fixture
def readme_install(pg_server: Server) -> Iterator[ReadmeInstall]:
    """The README's roles and database ("Install on Kubernetes"), dropped after the test."""
    setup = ReadmeInstall(pg_server)
    yield setup
    setup.drop()  # pytest runs this however the test ended
