"""SQL fragments that restrict a read to the namespaces its Access may read.

Each returns "" when the access is unrestricted (nothing configured), so such reads run
exactly the unfiltered query; otherwise a condition on `%(readable)s` (Access.sql_params).
A job is visible when its namespace is readable, a run when its job is, a dataset when
any of its names is (it shows only those names); what is not visible is absent: a 404 for
a page, missing from lists, totals and graphs.
"""

from __future__ import annotations

import functools
import re

from metastore.access import Access
from metastore.principal import ANONYMOUS

# Any restricted access: the fragments depend only on whether an access is restricted, so
# a statement's restricted text is built once with this (its values come from
# Access.sql_params at the request).
RESTRICTED = Access(principal=ANONYMOUS, readable=frozenset(), sensitive=frozenset())

# A dataset_names row's display rank, as projections.datasets.display_key: 0 a table's
# name in its metastore, 1 a name an event used, 2 any other.
_NAME_RANK = """CASE WHEN {n}.symlink_type = 'TABLE'
                      OR {n}.joined_by::text LIKE '%%"role":"metastore"%%' THEN 0
                 WHEN {n}.kind = 'emitted' THEN 1 ELSE 2 END"""


# What a target must satisfy to be visible, by kind: (the default target, the condition
# on it as `{t}`), each a condition on `%(readable)s`.
_CONDITIONS: dict[str, tuple[str, str]] = {
    # a namespace name column (readmodel.namespaces.name)
    "namespace": ("ns.name", "{t} = ANY(%(readable)s::text[])"),
    # a readmodel.jobs alias
    "job": ("j", "{t}.namespace = ANY(%(readable)s::text[])"),
    # a readmodel.runs alias (its job's namespace)
    "run": ("r", "{t}.job_namespace = ANY(%(readable)s::text[])"),
    # a job id expression (an edge's job): its job's namespace is readable
    "job_id": (
        "e.job_id",
        "EXISTS (SELECT 1 FROM readmodel.jobs vj"
        " WHERE vj.id = {t} AND vj.namespace = ANY(%(readable)s::text[]))",
    ),
    # a dataset id expression: one of its names is in a readable namespace
    "dataset": (
        "d.id",
        "EXISTS (SELECT 1 FROM readmodel.dataset_names vis"
        " WHERE vis.dataset_id = {t} AND vis.namespace = ANY(%(readable)s::text[]))",
    ),
    # a readmodel.dataset_names alias: a name shown only where readable
    "name": ("n", "{t}.namespace = ANY(%(readable)s::text[])"),
}


def visible(kind: str, access: Access, target: str | None = None) -> str:
    """`AND ...` on `target` (else the kind's default) by `kind`'s condition, or "" for an
    unrestricted access."""
    if not access.restricted:
        return ""
    default, condition = _CONDITIONS[kind]
    return " AND " + condition.format(t=target or default)


# (access, target=the kind's default) -> `AND ...` or ""
namespace_visible = functools.partial(visible, "namespace")
job_visible = functools.partial(visible, "job")
run_visible = functools.partial(visible, "run")
job_id_visible = functools.partial(visible, "job_id")
dataset_visible = functools.partial(visible, "dataset")
name_visible = functools.partial(visible, "name")


def visible_display_name(dataset_id: str = "d.id") -> str:
    """A scalar subquery: the dataset's display name among its readable names, as a
    two-element text array [namespace, name] (the hidden display name is never shown).
    Only for restricted access: unrestricted reads use datasets.namespace/name."""
    rank = _NAME_RANK.format(n="vn")
    return (
        "(SELECT ARRAY[vn.namespace, vn.name] FROM readmodel.dataset_names vn"
        f" WHERE vn.dataset_id = {dataset_id} AND vn.namespace = ANY(%(readable)s::text[])"
        f" ORDER BY {rank}, vn.first_seen, vn.namespace, vn.name LIMIT 1)"
    )


# --- statements written once, for both kinds of access ------------------------------------
# A statement built at import marks where a restricted read filters with `mark(kind,
# target)` (an SQL comment); `for_access` gives its text for an access: the marks removed
# (unrestricted: exactly today's statement) or replaced by their fragments.
_MARK = re.compile(r"/\*visible( where)? (\w+) ([\w.]+)\*/")


def mark(kind: str, target: str, where: bool = False) -> str:
    """Where a statement filters `target` (an alias or id expression) by `kind`'s fragment;
    `where`: a statement with no WHERE there (restricted, the fragment comes as `WHERE
    true AND ...`)."""
    assert kind in _CONDITIONS, kind
    return f"/*visible{' where' if where else ''} {kind} {target}*/"


def _fragment(found: re.Match[str]) -> str:
    where, kind, target = found.groups()
    return (" WHERE true" if where else "") + visible(kind, RESTRICTED, target)


def for_access(sql: str, restricted: bool) -> str:
    """`sql` with its marks removed, or (restricted) replaced by their fragments."""
    if not restricted:
        return _MARK.sub("", sql)
    return _MARK.sub(_fragment, sql)


def both(sql: str) -> dict[bool, str]:
    """`sql`'s text for an unrestricted and a restricted access, by Access.restricted."""
    return {restricted: for_access(sql, restricted) for restricted in (False, True)}
