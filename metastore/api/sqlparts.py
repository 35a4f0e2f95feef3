"""SQL fragments the resource modules share: JSON lists of references, LIKE patterns."""

from __future__ import annotations

from metastore.api import asof

# The datasets behind a set of edge rows (namespace, name), resolved from edge names to
# dataset ids, as a JSON array of {id, namespace, name} (decoded straight into DatasetRef
# structs). Format with `edges`, a subquery of (namespace, name) rows.
DATASET_REFS = """
coalesce((
    SELECT json_agg(json_build_object('id', x.id, 'namespace', x.namespace, 'name', x.name)
                    ORDER BY x.namespace, x.name, x.id)
    FROM (SELECT DISTINCT d.id, d.namespace, d.name
          FROM {edges} e
          JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
          JOIN readmodel.datasets d ON d.id = n.dataset_id) x
), '[]')::text
"""


def edge_datasets(table: str, key: str, outer: str, direction: str) -> str:
    """The datasets a job (job_edges) or a run (run_edges) read or wrote, as JSON."""
    edges = (
        f"(SELECT namespace, name FROM readmodel.{table} "
        f"WHERE {key} = {outer} AND direction = '{direction}')"
    )
    return DATASET_REFS.format(edges=edges)


def job_datasets_at(job: str, direction: str) -> str:
    """The datasets job `job` read or wrote as of `%(as_of)s`, as JSON."""
    return DATASET_REFS.format(edges=asof.job_edges_at(job, direction))


def like_substring(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, case-insensitively (compare to lower())."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def like_prefix(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{escaped}%"
