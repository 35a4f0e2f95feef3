"""SQL fragments that restrict a read to the namespaces its Access may read.

Each returns "" when the access is unrestricted (nothing configured), so such reads run
exactly the unfiltered query; otherwise a condition on `%(readable)s` (Access.sql_params).
A job is visible when its namespace is readable, a run when its job is, a dataset when
any of its names is (it shows only those names); what is not visible is absent: a 404 for
a page, missing from lists, totals and graphs.
"""

from __future__ import annotations

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


def namespace_visible(access: Access, column: str = "ns.name") -> str:
    """`AND ...` on a namespace name column (readmodel.namespaces.name)."""
    if not access.restricted:
        return ""
    return f" AND {column} = ANY(%(readable)s::text[])"


def job_visible(access: Access, job: str = "j") -> str:
    """`AND ...` on a readmodel.jobs alias."""
    if not access.restricted:
        return ""
    return f" AND {job}.namespace = ANY(%(readable)s::text[])"


def run_visible(access: Access, run: str = "r") -> str:
    """`AND ...` on a readmodel.runs alias (its job's namespace)."""
    if not access.restricted:
        return ""
    return f" AND {run}.job_namespace = ANY(%(readable)s::text[])"


def job_id_visible(access: Access, job_id: str = "e.job_id") -> str:
    """`AND ...` on a job id expression (an edge's job): its job's namespace is readable."""
    if not access.restricted:
        return ""
    return (
        " AND EXISTS (SELECT 1 FROM readmodel.jobs vj"
        f" WHERE vj.id = {job_id} AND vj.namespace = ANY(%(readable)s::text[]))"
    )


def dataset_visible(access: Access, dataset_id: str = "d.id") -> str:
    """`AND ...` on a dataset id expression: one of its names is in a readable namespace."""
    if not access.restricted:
        return ""
    return (
        " AND EXISTS (SELECT 1 FROM readmodel.dataset_names vis"
        f" WHERE vis.dataset_id = {dataset_id} AND vis.namespace = ANY(%(readable)s::text[]))"
    )


def name_visible(access: Access, name: str = "n") -> str:
    """`AND ...` on a readmodel.dataset_names alias: a name shown only where readable."""
    if not access.restricted:
        return ""
    return f" AND {name}.namespace = ANY(%(readable)s::text[])"


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
_FRAGMENTS = {
    "namespace": namespace_visible,
    "job": job_visible,
    "job_id": job_id_visible,
    "run": run_visible,
    "dataset": dataset_visible,
    "name": name_visible,
}
_MARK = re.compile(r"/\*visible (\w+) ([\w.]+)\*/")


def mark(kind: str, target: str) -> str:
    """Where a statement filters `target` (an alias or id expression) by `kind`'s fragment."""
    assert kind in _FRAGMENTS, kind
    return f"/*visible {kind} {target}*/"


def for_access(sql: str, restricted: bool) -> str:
    """`sql` with its marks removed, or (restricted) replaced by their fragments."""
    if not restricted:
        return _MARK.sub("", sql)
    return _MARK.sub(lambda m: _FRAGMENTS[m.group(1)](RESTRICTED, m.group(2)), sql)


def both(sql: str) -> dict[bool, str]:
    """`sql`'s text for an unrestricted and a restricted access, by Access.restricted."""
    return {restricted: for_access(sql, restricted) for restricted in (False, True)}
