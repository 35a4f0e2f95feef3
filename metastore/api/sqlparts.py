"""SQL fragments the resource modules share: JSON lists of references, LIKE patterns."""

from __future__ import annotations

# The datasets a job (or a run) read or wrote, resolved from edge names to dataset ids,
# as a JSON array of {id, namespace, name} (decoded straight into DatasetRef structs).
# Format with the edge table and the key column; bind `direction` and the key.
EDGE_DATASETS = """
coalesce((
    SELECT json_agg(json_build_object('id', x.id, 'namespace', x.namespace, 'name', x.name)
                    ORDER BY x.namespace, x.name, x.id)
    FROM (SELECT DISTINCT d.id, d.namespace, d.name
          FROM readmodel.{table} e
          JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
          JOIN readmodel.datasets d ON d.id = n.dataset_id
          WHERE e.{key} = {outer} AND e.direction = '{direction}') x
), '[]')::text
"""


def edge_datasets(table: str, key: str, outer: str, direction: str) -> str:
    return EDGE_DATASETS.format(table=table, key=key, outer=outer, direction=direction)


def like_substring(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, case-insensitively (compare to lower())."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def like_prefix(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{escaped}%"
