"""The bounds of every read answer, in one place: its time, the work of a walk, its size.

The resource modules, the OpenAPI document and README's "Limits" table use these, so a
bound is stated where it is enforced. Each answer is bounded three ways:

- time: every statement of a read runs under METASTORE_READ_TIMEOUT (metastore/db.py);
- work: a graph walk stops at NODE_LIMIT nodes or VISIT_LIMIT edges visited and says
  `truncated`, whatever the depth asked for;
- size: a page holds at most `limit` items (params.Limit) and PAGE_BYTES of stored JSON,
  an embedded list its first EMBEDDED_REFS (EDGE_JOBS on an edge) with a count of all,
  and no answer is larger than MAX_ANSWER_BYTES apart from the parts a producer sent,
  served as sent (a facet, a schema, an event: each at most METASTORE_MAX_EVENT_BYTES).
"""

from __future__ import annotations

# Graph walks (/lineage, /lineage/runs, /datasets/{id}/column-lineage).
DEFAULT_DEPTH = 3
MAX_DEPTH = 20
NODE_LIMIT = 1_000  # nodes (jobs and datasets, runs, fields) a walk keeps
# Edges a walk may look at, all levels together: a node with 20,000 readers is visited
# in bounded time, and the walk answers `truncated` past it.
VISIT_LIMIT = 20_000
# Edges an answer holds: of the /lineage graph between its nodes, of column lineage.
EDGE_LIMIT = 5_000

# Staleness that travels: a dataset is at risk when a dataset upstream of it is stale
# because its writer failed; the walk upstream (through the inputs of each dataset's last
# write) goes at most UPSTREAM_HOPS datasets up and looks at UPSTREAM_DATASETS datasets
# besides those an answer shows.
UPSTREAM_HOPS = 20
UPSTREAM_DATASETS = 1_000

# Embedded lists: the first of them (by name) and a count of all.
EMBEDDED_REFS = 100
EDGE_JOBS = 20  # the jobs that reported one field edge (Trino: a job per query)
EMBEDDED_PAGE = 10  # the first page of /versions and /runs in /datasets/{id}

# Bytes. A page of stored JSON (schema versions, a run's events) ends once it holds
# PAGE_BYTES (always at least its first item); the dataset page embeds EMBEDDED_BYTES of
# versions. Everything the API builds itself stays far below MAX_ANSWER_BYTES.
PAGE_BYTES = 4 * 1024 * 1024
EMBEDDED_BYTES = 1024 * 1024
MAX_ANSWER_BYTES = 16 * 1024 * 1024
