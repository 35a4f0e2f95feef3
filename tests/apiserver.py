"""A read API over a database loaded with the conformance scenarios, shared by a module.

The events go into the log the way ingest puts them there, the real projector folds them
(`catch_up`), and a real `metastore api` process answers over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from projections.runner import catch_up
from tests.logdata import append
from tests.support import access_env, all_scenario_events, bearer_clients, running


@contextmanager
def scenario_api(
    pg_server: Any,
    template_db: str,
    log_dir: Path,
    events: list[dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
    time_zone: str | None = None,
) -> Iterator[tuple[str, str]]:
    """Yields (base_url, database_url) of an API over the folded scenario events.

    `time_zone`: the database's default TimeZone for its sessions (else the server's).
    """
    with pg_server.database("api", template_db) as url:
        if time_zone is not None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("ALTER DATABASE {} SET TimeZone = {}").format(
                        sql.Identifier(conn.info.dbname), sql.Literal(time_zone)
                    )
                )
        with psycopg.connect(url, autocommit=True) as conn:
            append(conn, all_scenario_events() if events is None else events)
        catch_up(url)
        with running("api", url, log_dir, env=env) as api:
            yield api.base_url, url


@contextmanager
def policy_clients(
    pg_server: Any,
    template_db: str,
    folder: Path,
    events: list[dict[str, Any]],
    users: dict[str, list[str]],
    policy: dict[str, Any],
) -> Iterator[dict[str, httpx.Client]]:
    """A client of /api/v1 for each of `users` (name: groups), each with a read token of its
    own, over an API with METASTORE_POLICY_FILE `policy` and the folded `events`."""
    env = access_env(folder, policy, users, ["read"], "token-of-")
    with scenario_api(pg_server, template_db, folder, events, env=env) as (url, _):
        made = bearer_clients(url + "/api/v1", users, "token-of-")
        try:
            yield made
        finally:
            for client in made.values():
                client.close()


def policy_clients_fixture(
    folder_name: str,
    events: Callable[[], list[dict[str, Any]]],
    users: dict[str, list[str]],
    policy: dict[str, Any],
) -> Any:
    """A module's `clients` fixture: `policy_clients` over `events()`, in a folder of its own
    named after `folder_name`."""

    @pytest.fixture(scope="module")
    def clients(
        pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[dict[str, httpx.Client]]:
        folder = tmp_path_factory.mktemp(folder_name)
        with policy_clients(pg_server, template_db, folder, events(), users, policy) as made:
            yield made

    return clients


@contextmanager
def scenario_client(
    pg_server: Any, template_db: str, log_dir: Path, timeout: float = 30
) -> Iterator[httpx.Client]:
    """A client of the read API (/api/v1) over the folded scenario events."""
    with (
        scenario_api(pg_server, template_db, log_dir) as (url, _),
        httpx.Client(base_url=url + "/api/v1", timeout=timeout) as client,
    ):
        yield client


def get(api: httpx.Client, path: str, **params: Any) -> Any:
    """The JSON of a 200 answer to GET `path` (anything else fails the test)."""
    response = api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()
