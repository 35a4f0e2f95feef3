"""Database privileges: what `metastore migrate` checks before it waits for anything, and
what it grants the API's and the projector's roles in a least-privilege deployment.

Three roles (README, "Install"): the database's owner runs `migrate`; the projector's role
owns the read models (it creates, rebuilds and swaps their tables, so `metastore replay`
runs as it too); the API's role appends to the log and reads the rest. Each process needs
exactly what NEEDS lists, and tests/test_roles.py runs each as such a role.
"""

from __future__ import annotations

import functools
from typing import Any

import psycopg
from psycopg import sql

from metastore.exit import Exit


class MissingPrivilege(Exit):
    """A role lacks a privilege; the message names it and the statement that grants it."""

    status = 3


class RoleMistake(Exit):
    """A configuration mistake about roles (README: exit 2): `migrate` runs as a role that
    is not the store's owner, or a METASTORE_*_ROLE names no role. No GRANT fixes it."""

    status = 2


# What the migrator is and may do, in one round trip.
MIGRATOR = """
SELECT current_user, current_database(), current_schema(),
       (SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()),
       (SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = current_schema()),
       has_database_privilege(current_database(), 'CREATE'),
       current_schema() IS NOT NULL AND has_schema_privilege(current_schema(), 'CREATE'),
       (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass(%s)),
       (SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = to_regclass(%s)),
       (SELECT rolsuper FROM pg_roles
        WHERE oid = (SELECT datdba FROM pg_database WHERE datname = current_database()))
"""


def quoted(conn: psycopg.Connection[Any], name: str) -> str:
    """`name` as an SQL identifier, quoted, for a statement the operator copies."""
    return sql.Identifier(name).as_string(conn)


def check_migrator(
    conn: psycopg.Connection[Any],
    migration_table: str,
    *,
    api_role: str | None = None,
    projector_role: str | None = None,
) -> None:
    """Raises MissingPrivilege unless the connected role may apply the migrations: create
    tables in the current schema and schemas in the database (`readmodel`), and act as the
    owner of what earlier migrations made. Raises RoleMistake when it is the wrong role for
    that: the API's or the projector's, or not the owner of an existing store's tables."""
    row = conn.execute(MIGRATOR, (migration_table, migration_table)).fetchone()
    assert row is not None
    (user, database, schema, db_owner, schema_owner, schemas_ok, tables_ok, owner, acts,
     db_owner_is_superuser) = row  # fmt: skip
    q = functools.partial(quoted, conn)
    for process, role in (("API", api_role), ("projector", projector_role)):
        if user == role:
            raise RoleMistake(
                f"`metastore migrate` connected as role {q(user)}, the {process}'s "
                f"(METASTORE_{process.upper()}_ROLE); it runs as the database's owner, here "
                f"{q(db_owner)}: set METASTORE_DATABASE_URL's user to it"
            )
    if owner is not None and not acts:
        raise RoleMistake(
            f"role {q(user)} may not change the tables earlier migrations made: they belong "
            f"to role {q(owner)}; run `metastore migrate` as {q(owner)}"
        )
    if schema is None:
        raise MissingPrivilege(
            f"role {q(user)} has no schema to create tables in (no schema on its search_path "
            f"exists in database {q(database)}); as a superuser run: "
            f"CREATE SCHEMA public AUTHORIZATION {q(user)};"
        )
    lacks = []  # (the privilege, the statement that grants it)
    if not tables_ok:
        lacks.append(
            (f"CREATE on schema {q(schema)}", f"GRANT CREATE ON SCHEMA {q(schema)} TO {q(user)};")
        )
    if not schemas_ok:
        lacks.append(
            (
                f"CREATE on database {q(database)}",
                f"GRANT CREATE ON DATABASE {q(database)} TO {q(user)};",
            )
        )
    if not lacks:
        return
    # PostgreSQL 15's schema public belongs to whoever owns the database.
    if len(lacks) == 2 and schema_owner == "pg_database_owner":
        if not db_owner_is_superuser:
            # A database given to a role of its own has its migrator: moving the database
            # to this role (perhaps a process's) would undo the least privilege it set up.
            raise RoleMistake(
                f"role {q(user)} is not the owner of database {q(database)}, which `metastore "
                f"migrate` runs as: run it as {q(db_owner)}"
            )
        fix = f"ALTER DATABASE {q(database)} OWNER TO {q(user)};"
    else:
        fix = " ".join(grant for _, grant in lacks)
    raise MissingPrivilege(
        f"role {q(user)} lacks {' and '.join(what for what, _ in lacks)}, which `metastore "
        f"migrate` needs (PostgreSQL gives {'them' if len(lacks) == 2 else 'it'} to the "
        f"database's owner, here {q(db_owner)}); as a superuser run: {fix}"
    )


# What each process needs beyond what PUBLIC has: (kind, object, privilege). The read
# models' own tables are not listed: the projector's role creates and owns them, and the
# API's role reads them through default privileges (grant_process_roles).
READMODEL = "readmodel"
NEEDS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "api": (
        ("DATABASE", "", "CONNECT"),
        ("SCHEMA", READMODEL, "USAGE"),
        ("TABLE", "event_log", "SELECT"),
        ("TABLE", "event_log", "INSERT"),
        ("TABLE", "event_digests", "SELECT"),
        ("TABLE", "event_digests", "INSERT"),
        ("FUNCTION", "event_log_ensure_partitions(integer)", "EXECUTE"),
        ("TABLE", "event_log_clock", "SELECT"),
        ("TABLE", "projection_state", "SELECT"),
        ("TABLE", "dead_letters", "SELECT"),
        ("TABLE", "{migration_table}", "SELECT"),
    ),
    "projector": (
        ("DATABASE", "", "CONNECT"),
        # A rebuild builds its tables in a schema of its own and swaps them in.
        ("DATABASE", "", "CREATE"),
        ("SCHEMA", READMODEL, "USAGE"),
        ("SCHEMA", READMODEL, "CREATE"),
        ("TABLE", "event_log", "SELECT"),
        ("TABLE", "event_log_clock", "SELECT"),
        ("TABLE", "projection_state", "SELECT"),
        ("TABLE", "projection_state", "INSERT"),
        ("TABLE", "projection_state", "UPDATE"),
        ("TABLE", "dead_letters", "SELECT"),
        ("TABLE", "dead_letters", "INSERT"),
        ("TABLE", "dead_letters", "DELETE"),
        ("TABLE", "{migration_table}", "SELECT"),
    ),
}
HAS_PRIVILEGE = {
    "DATABASE": "has_database_privilege",
    "SCHEMA": "has_schema_privilege",
    "TABLE": "has_table_privilege",
    "FUNCTION": "has_function_privilege",
}
ROLE_EXISTS = "SELECT to_regrole(%s) IS NOT NULL"
# Whether `reader` gets SELECT on every table `owner` creates from now on, in any schema
# (a rebuild creates its tables in readmodel_build, then moves them).
READS_WHAT_OWNER_CREATES = """
SELECT EXISTS (
    SELECT 1 FROM pg_default_acl d CROSS JOIN aclexplode(d.defaclacl) a
    WHERE d.defaclrole = to_regrole(%(owner)s) AND d.defaclnamespace = 0
      AND d.defaclobjtype = 'r' AND a.grantee = to_regrole(%(reader)s)
      AND a.privilege_type = 'SELECT')
"""
UNREADABLE_READ_MODELS = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p')
  AND NOT has_table_privilege(to_regrole(%(reader)s), c.oid, 'SELECT')
ORDER BY 1
"""


def grant_process_roles(
    conn: psycopg.Connection[Any],
    migration_table: str,
    *,
    api_role: str | None,
    projector_role: str | None,
) -> list[str]:
    """Grants the API's and the projector's roles what they lack of NEEDS (the migrator
    owns those objects); returns the statements it ran. Raises MissingPrivilege when a
    role does not exist, or when the API's role could not read the tables the projector's
    role creates (only a superuser can set that up: the message says how)."""
    (database,) = conn.execute("SELECT current_database()").fetchone() or ("",)
    ran = []
    for process, role in (("api", api_role), ("projector", projector_role)):
        if not role:
            continue
        if conn.execute(ROLE_EXISTS, (role,)).fetchone() != (True,):
            raise RoleMistake(
                f"METASTORE_{process.upper()}_ROLE={role!r}: no such role in the database "
                "server; create it first (README, Install)"
            )
        for kind, name, privilege in NEEDS[process]:
            target = name.format(migration_table=migration_table) or database
            check = f"SELECT {HAS_PRIVILEGE[kind]}(%s, %s, %s)"
            if conn.execute(check, (role, target, privilege)).fetchone() == (True,):
                continue
            what = sql.Identifier(target) if kind != "FUNCTION" else sql.SQL(target)
            statement = sql.SQL("GRANT {} ON {} {} TO {}").format(
                sql.SQL(privilege), sql.SQL(kind), what, sql.Identifier(role)
            )
            conn.execute(statement)
            ran.append(statement.as_string(conn))
    if projector_role:
        ran += _hand_read_models_to(conn, database, projector_role)
    if api_role:
        ran += _let_api_read_models(conn, database, api_role, projector_role)
    return ran


def _let_api_read_models(
    conn: psycopg.Connection[Any], database: str, api_role: str, projector_role: str | None
) -> list[str]:
    q = functools.partial(quoted, conn)
    (migrator,) = conn.execute("SELECT current_user").fetchone() or ("",)
    owner = projector_role or migrator
    ran = []
    reads = {"owner": owner, "reader": api_role}
    if conn.execute(READS_WHAT_OWNER_CREATES, reads).fetchone() != (True,):
        statement = (
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {q(owner)} GRANT SELECT ON TABLES TO {q(api_role)}"
        )
        refusal = (
            f"role {q(api_role)} (the API's) could not read the tables role {q(owner)} (the "
            f"projector's) creates; as a superuser, connected to database {q(database)}, "
            f"run: {statement};"
        )
        ran.append(_run_as(conn, owner, statement, refusal))
    unreadable = [
        row[0] for row in conn.execute(UNREADABLE_READ_MODELS, {**reads, "schema": READMODEL})
    ]
    if unreadable:
        statement = f"GRANT SELECT ON ALL TABLES IN SCHEMA {READMODEL} TO {q(api_role)}"
        refusal = (
            f"role {q(api_role)} (the API's) may not read {len(unreadable)} read-model "
            f"table(s) of role {q(owner)} (first {READMODEL}.{unreadable[0]}); as "
            f"{q(owner)} or a superuser run: {statement};"
        )
        ran.append(_run_as(conn, owner, statement, refusal))
    return ran


def _run_as(conn: psycopg.Connection[Any], owner: str, statement: str, refusal: str) -> str:
    """Runs `statement`, which only `owner` (or a superuser) may; without being it, stops
    with `refusal`, which says what to run instead."""
    if not acts_as(conn, owner):
        raise MissingPrivilege(refusal)
    conn.execute(statement)
    return statement


def acts_as(conn: psycopg.Connection[Any], role: str) -> bool:
    """Whether the connected role is `role`, a member of it, or a superuser."""
    return conn.execute("SELECT pg_has_role(%s, 'MEMBER')", (role,)).fetchone() == (True,)


# The schemas a rebuild makes and drops (projections/replay.py): a leftover one must be the
# projector's too.
SCRATCH_SCHEMAS = ("readmodel_build", "readmodel_old")
# What of the read models the projector's role does not own (it drops, rebuilds and swaps
# them), schemas first (a table's new owner needs CREATE on its schema), with the owner and
# whether the connected role acts as it (to hand it over, it must act as the new one too).
NOT_THE_PROJECTORS = """
SELECT kind, name, owner, pg_has_role(owner_id, 'MEMBER')
FROM (
    SELECT 'SCHEMA' AS kind, format('%%I', n.nspname) AS name, n.nspowner AS owner_id,
           pg_get_userbyid(n.nspowner) AS owner
    FROM pg_namespace n
    WHERE n.nspname = ANY(%(scratch)s) AND n.nspowner <> to_regrole(%(projector)s)
    UNION ALL
    SELECT 'TABLE', format('%%I.%%I', n.nspname, c.relname), c.relowner,
           pg_get_userbyid(c.relowner)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = ANY(%(schemas)s) AND c.relkind IN ('r', 'p')
      AND c.relowner <> to_regrole(%(projector)s)
) AS foreign_objects
ORDER BY kind = 'TABLE', name
"""


def _hand_read_models_to(
    conn: psycopg.Connection[Any], database: str, projector_role: str
) -> list[str]:
    """Makes the projector's role the owner of the read models (a store the migrating role
    or another projector's role created); returns the statements it ran. Raises
    MissingPrivilege naming the statement(s) a superuser runs when it may not."""
    q = functools.partial(quoted, conn)
    params = {
        "projector": projector_role,
        "scratch": list(SCRATCH_SCHEMAS),
        "schemas": [READMODEL, *SCRATCH_SCHEMAS],
    }
    rows = conn.execute(NOT_THE_PROJECTORS, params).fetchall()
    statements = [f"ALTER {kind} {name} OWNER TO {q(projector_role)}" for kind, name, _, _ in rows]
    acts_as_owners = all(acts for *_, acts in rows)
    if rows and not (acts_as_owners and acts_as(conn, projector_role)):
        (migrator,) = conn.execute("SELECT current_user").fetchone() or ("",)
        owners = sorted({owner for _, _, owner, _ in rows})
        first = next((name for kind, name, _, _ in rows if kind == "TABLE"), rows[0][1])
        said = (
            f"{len(rows)} read-model table(s) or schema(s) (first {first}) belong to role(s) "
            f"{', '.join(q(o) for o in owners)}, not to {q(projector_role)}, the projector's "
            "(METASTORE_PROJECTOR_ROLE), which drops, rebuilds and swaps them"
        )
        if acts_as_owners:
            raise MissingPrivilege(
                f"{said}; `metastore migrate` hands them over once role {q(migrator)} is a "
                f"member of {q(projector_role)}: as a superuser run: "
                f"GRANT {q(projector_role)} TO {q(migrator)};"
            )
        raise MissingPrivilege(
            f"{said}; as a superuser, connected to database {q(database)}, run: "
            + " ".join(f"{statement};" for statement in statements)
        )
    with conn.transaction():
        for statement in statements:
            conn.execute(statement)
    return statements
