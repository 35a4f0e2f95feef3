"""Least privilege, as the README's "ReadmeInstall" sets it up: its SQL makes three real roles and
the database; `metastore migrate` runs as the owner and grants the others what their
process needs; `api`, `projector` and `replay` then each run as their own role, and what a
user does through them works (ingest, reads, status, export, a replay swapping fresh tables
in), while what the role has no business doing is refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import errors

from projections.schema import create_readmodel_tables
from tests.reliability.conftest import run_event
from tests.support import ReadmeInstall, running

DEFAULT_PRIVILEGES = "ALTER DEFAULT PRIVILEGES"
PROJECTOR_MEMBERSHIP = "GRANT "  # the owner is a member of the projector's role


def refused(url: str, statement: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute(statement)
        except errors.InsufficientPrivilege:
            return True
    return False


def wait_for(check: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return result


def test_each_process_runs_as_its_own_role_with_the_readme_sql(
    readme_install: ReadmeInstall, tmp_path: Path
) -> None:
    readme_install.run_sql()
    migrated = readme_install.migrate()
    assert migrated.returncode == 0, migrated.stderr
    assert "granted" in migrated.stderr
    again = readme_install.migrate()  # every upgrade: nothing left to grant
    assert again.returncode == 0 and "granted" not in again.stderr, again.stderr

    env = {"METASTORE_AUTH": "disabled"}
    with (
        running(
            "projector", readme_install.url(readme_install.projector), tmp_path, env=env
        ) as projector,
        running("api", readme_install.url(readme_install.api), tmp_path, env=env) as api,
        httpx.Client(base_url=api.base_url, timeout=30) as http,
    ):
        wait_for(lambda: http.get("/readyz").status_code == 200, "api not ready")
        wait_for(lambda: httpx.get(projector.base_url + "/readyz").status_code == 200, "projector")
        assert http.post("/ingest/openlineage", json=run_event(job="least")).status_code == 200

        def jobs() -> list[dict[str, Any]]:
            answer = http.get("/api/v1/jobs", params={"q": "least"})
            assert answer.status_code == 200, answer.text
            return list(answer.json()["items"])

        (job,) = wait_for(jobs, f"the event was not folded:\n{projector.output()[-2000:]}")
        for path in (
            f"/api/v1/jobs/{job['id']}",
            "/api/v1/datasets",
            "/api/v1/namespaces",
            "/api/v1/status",
            "/export/openlineage/events",
        ):
            assert http.get(path).status_code == 200, (path, http.get(path).text)

        # A replay, as the projector's role, swaps in tables it made: the API still reads.
        replay = subprocess.run(
            [sys.executable, "-m", "metastore", "replay", "--no-progress"],
            capture_output=True,
            text=True,
            timeout=120,
            env={
                **os.environ,
                "METASTORE_DATABASE_URL": readme_install.url(readme_install.projector),
            },
        )
        assert replay.returncode == 0, replay.stderr
        assert [j["id"] for j in jobs()] == [job["id"]]
        assert http.get("/api/v1/status").status_code == 200

    api_url, projector_url = (
        readme_install.url(readme_install.api),
        readme_install.url(readme_install.projector),
    )
    with psycopg.connect(api_url, autocommit=True) as api_conn:  # what the API does daily
        api_conn.execute("SELECT event_log_ensure_partitions(3)")
    for statement in (
        "UPDATE event_log SET producer = 'x'",
        "DELETE FROM event_digests",
        "CREATE TABLE public.intruder (x int)",
        "CREATE TABLE readmodel.intruder (x int)",
        "UPDATE projection_state SET version = 0",
        "DELETE FROM readmodel.jobs",
    ):
        assert refused(api_url, statement), ("api", statement)
    for statement in (
        "INSERT INTO event_digests VALUES ('\\x00')",
        "CREATE TABLE public.intruder (x int)",
        "DROP TABLE event_log_default",
    ):
        assert refused(projector_url, statement), ("projector", statement)


def test_without_the_default_privileges_migrate_names_the_statement(
    readme_install: ReadmeInstall,
) -> None:
    # (with the owner a member of the projector's role, migrate sets them itself)
    readme_install.run_sql(leave_out=(DEFAULT_PRIVILEGES, PROJECTOR_MEMBERSHIP))
    result = readme_install.migrate()
    assert result.returncode == 3
    line = result.stderr.strip().splitlines()[-1]  # after the log of what was applied
    fix = (
        f'ALTER DEFAULT PRIVILEGES FOR ROLE "{readme_install.projector}" GRANT SELECT ON TABLES '
        f'TO "{readme_install.api}";'
    )
    assert line.endswith(f'connected to database "{readme_install.database}", run: {fix}'), line
    with psycopg.connect(
        readme_install.pg_server.url(readme_install.database), autocommit=True
    ) as conn:
        conn.execute(fix)
    result = readme_install.migrate()
    assert result.returncode == 0, result.stderr


def folded_jobs(http: httpx.Client, name: str) -> list[dict[str, Any]]:
    answer = http.get("/api/v1/jobs", params={"q": name})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def replay_as(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metastore", "replay", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "METASTORE_DATABASE_URL": url},
    )


def test_an_owner_in_the_projectors_role_sets_the_default_privileges_itself(
    readme_install: ReadmeInstall,
) -> None:
    readme_install.run_sql(leave_out=DEFAULT_PRIVILEGES)
    result = readme_install.migrate()
    assert result.returncode == 0, result.stderr
    assert (
        f'ALTER DEFAULT PRIVILEGES FOR ROLE "{readme_install.projector}" GRANT SELECT ON TABLES '
        f'TO "{readme_install.api}"' in result.stderr
    )


def test_a_store_of_one_role_adopts_the_process_roles(
    readme_install: ReadmeInstall, tmp_path: Path
) -> None:
    """A store that ran as its owner alone is given the README's roles: migrate makes the
    projector's role the owner of the read models, and the projector and `metastore replay`
    then run as that role, without a superuser's step."""
    install = readme_install
    install.run_sql()
    assert install.migrate(roles=False).returncode == 0
    env = {"METASTORE_AUTH": "disabled"}
    owner_url = install.url(install.owner)
    with (
        running("projector", owner_url, tmp_path, env=env),
        running("api", owner_url, tmp_path, env=env) as api,
        httpx.Client(base_url=api.base_url, timeout=30) as http,
    ):
        assert http.post("/ingest/openlineage", json=run_event(job="before")).status_code == 200
        wait_for(lambda: folded_jobs(http, "before"), "not folded as the owner")

    result = install.migrate()  # the chart's hook, now with the roles
    assert result.returncode == 0, result.stderr
    assert f'ALTER TABLE readmodel.jobs OWNER TO "{install.projector}"' in result.stderr

    with (
        running("projector", install.url(install.projector), tmp_path, env=env) as projector,
        running("api", install.url(install.api), tmp_path, env=env) as api,
        httpx.Client(base_url=api.base_url, timeout=30) as http,
    ):
        assert http.post("/ingest/openlineage", json=run_event(job="after")).status_code == 200
        wait_for(lambda: folded_jobs(http, "after"), f"not folded:\n{projector.output()[-2000:]}")
        replay = replay_as(install.url(install.projector))
        assert replay.returncode == 0, replay.stderr
        assert folded_jobs(http, "before") and folded_jobs(http, "after")
        assert "must be owner" not in projector.output()


def test_without_the_membership_migrate_names_the_one_grant(readme_install: ReadmeInstall) -> None:
    """The SQL of an older README made the roles without making the owner a member of the
    projector's: migrate names the one statement (never the database to a process's role),
    and after it hands the read models over."""
    install = readme_install
    install.run_sql(leave_out=PROJECTOR_MEMBERSHIP)
    assert install.migrate(roles=False).returncode == 0
    with psycopg.connect(install.url(install.owner), autocommit=True) as conn:
        create_readmodel_tables(conn)  # what the owner's projector made
    result = install.migrate()
    assert result.returncode == 3, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    fix = f'GRANT "{install.projector}" TO "{install.owner}";'
    assert line.endswith(f"as a superuser run: {fix}"), line
    assert "OWNER TO" not in line, line
    with psycopg.connect(install.pg_server.url(install.database), autocommit=True) as admin:
        admin.execute(fix)
        result = install.migrate()
        assert result.returncode == 0, result.stderr
        owner = admin.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'jobs'")
        assert owner.fetchone() == (install.projector,)


def test_migrate_as_a_process_role_names_the_owner_and_exits_2(
    readme_install: ReadmeInstall,
) -> None:
    """The API's or the projector's role running migrate (a URL of the wrong Secret) is a
    configuration mistake: exit 2 naming the owner, never advice to give a process's role
    the database."""
    install = readme_install
    install.run_sql()
    with psycopg.connect(install.pg_server.url(install.database), autocommit=True) as admin:
        # (migrate grants it; done by hand here so that they reach a store not yet made)
        admin.execute(f'GRANT CONNECT ON DATABASE "{install.database}" TO "{install.api}"')
        admin.execute(f'GRANT CONNECT ON DATABASE "{install.database}" TO "{install.projector}"')
    told = install.migrate(as_role=install.api)  # METASTORE_API_ROLE names it
    assert told.returncode == 2, told.stderr
    (line,) = told.stderr.strip().splitlines()
    assert f'connected as role "{install.api}", the API\'s (METASTORE_API_ROLE)' in line
    assert line.endswith(f'here "{install.owner}": set METASTORE_DATABASE_URL\'s user to it')
    untold = install.migrate(as_role=install.projector, roles=False)
    assert untold.returncode == 2, untold.stderr
    (line,) = untold.stderr.strip().splitlines()
    assert line.endswith(
        f'is not the owner of database "{install.database}", which '
        f'`metastore migrate` runs as: run it as "{install.owner}"'
    ), line
    for line in (told.stderr, untold.stderr):
        assert "OWNER TO" not in line and "GRANT" not in line
    # Once the store exists, the owner of its tables is named (also to a role not told).
    assert install.migrate().returncode == 0
    later = install.migrate(as_role=install.api, roles=False)
    assert later.returncode == 2, later.stderr
    assert f'run `metastore migrate` as "{install.owner}"' in later.stderr


def test_read_models_of_an_earlier_projector_role_are_named_statement_by_statement(
    readme_install: ReadmeInstall,
) -> None:
    """The projector moves to a new role: the owner acts as neither, so migrate names each
    statement a superuser runs; after them, replay runs as the new role."""
    install = readme_install
    install.run_sql(leave_out=PROJECTOR_MEMBERSHIP)
    assert install.migrate().returncode == 0
    with psycopg.connect(install.url(install.projector), autocommit=True) as conn:
        create_readmodel_tables(conn)  # what the projector does when it first starts
    earlier, install.projector = install.projector, f"{install.projector}2"
    admin = psycopg.connect(install.pg_server.url(install.database), autocommit=True)
    try:
        admin.execute(f'CREATE ROLE "{install.projector}" LOGIN')
        admin.execute(
            f'ALTER DEFAULT PRIVILEGES FOR ROLE "{install.projector}" '
            f'GRANT SELECT ON TABLES TO "{install.api}"'
        )
        result = install.migrate()
        assert result.returncode == 3, result.stderr
        line = result.stderr.strip().splitlines()[-1]
        assert f'belong to role(s) "{earlier}", not to "{install.projector}"' in line, line
        statements = line.split(f'connected to database "{install.database}", run: ', 1)[1]
        tables = admin.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'readmodel'"
        ).fetchone()
        assert tables and statements.count(f'OWNER TO "{install.projector}";') == tables[0]
        admin.execute(statements.encode())
        result = install.migrate()
        assert result.returncode == 0, result.stderr
        replay = replay_as(install.url(install.projector))
        assert replay.returncode == 0, replay.stderr
    finally:
        admin.close()
        install.drop()
        with psycopg.connect(install.pg_server.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{earlier}"')
