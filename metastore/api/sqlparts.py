"""SQL fragments the resource modules share: JSON lists of references, LIKE patterns."""

from __future__ import annotations

from metastore.api import asof, limits
from metastore.api.visibility import RESTRICTED, dataset_visible, visible_display_name

# The datasets behind a set of edge rows (namespace, name), resolved from edge names to
# dataset ids, as a JSON array of {id, namespace, name} (decoded straight into DatasetRef
# structs). Format with `edges`, a subquery of (namespace, name) rows.
DATASET_REFS = """
coalesce((
    SELECT json_agg(json_build_object('id', x.id, 'namespace', x.namespace, 'name', x.name)
                    ORDER BY x.namespace, x.name, x.id)
    FROM (SELECT DISTINCT d.id, {display}
          FROM {edges} e
          JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
          JOIN readmodel.datasets d ON d.id = n.dataset_id{display_join}{visible}
          ORDER BY 2, 3, 1 LIMIT {cap}) x
), '[]')::text,
(SELECT count(DISTINCT n.dataset_id)
 FROM {edges} e
 JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name{counted})
"""
# Restricted: the visible datasets only, each under its display name among its readable
# names (api/visibility.py), as of now whatever the moment.
VISIBLE_DISPLAY = (
    f"({visible_display_name('d.id')})[1] AS namespace, ({visible_display_name('d.id')})[2] AS name"
)
_VISIBLE = {
    "display_join": "",
    "display": VISIBLE_DISPLAY,
    "visible": "\n          WHERE true" + dataset_visible(RESTRICTED, "d.id"),
    "counted": "\n WHERE true" + dataset_visible(RESTRICTED, "n.dataset_id"),
}


def dataset_refs(edges: str, display: str, display_join: str, restricted: bool) -> str:
    """DATASET_REFS of `edges`, for an unrestricted or a restricted access."""
    if restricted:
        return DATASET_REFS.format(edges=edges, cap=REF_CAP, **_VISIBLE)
    return DATASET_REFS.format(
        edges=edges,
        cap=REF_CAP,
        display=display,
        display_join=display_join,
        visible="",
        counted="",
    )


# How many of a job's or run's datasets its answer embeds (the rest: the counts, the graph).
REF_CAP = limits.EMBEDDED_REFS


# A page of the datasets a job or run (`edges`: RUN_EDGES_OF, JOB_EDGES_OF) read or wrote,
# by display name: the whole list behind the capped `inputs` and `outputs`.
DATASETS_PAGE = """
SELECT DISTINCT d.id, d.namespace, d.name
FROM {edges} e
JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
JOIN readmodel.datasets d ON d.id = n.dataset_id
WHERE (%(after_namespace)s::text IS NULL
       OR (d.namespace, d.name, d.id) > (%(after_namespace)s, %(after_name)s, %(after_id)s::uuid))
ORDER BY d.namespace, d.name, d.id
LIMIT %(limit)s
"""
# Restricted: the visible ones, by their display name among their readable names.
DATASETS_PAGE_VISIBLE = f"""
SELECT x.id, x.namespace, x.name FROM (
    SELECT DISTINCT d.id, v.shown[1] AS namespace, v.shown[2] AS name
    FROM {{edges}} e
    JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
    JOIN readmodel.datasets d ON d.id = n.dataset_id
    CROSS JOIN LATERAL (SELECT {visible_display_name("d.id")} AS shown) v
    WHERE v.shown IS NOT NULL) x
WHERE (%(after_namespace)s::text IS NULL
       OR (x.namespace, x.name, x.id) > (%(after_namespace)s, %(after_name)s, %(after_id)s::uuid))
ORDER BY x.namespace, x.name, x.id
LIMIT %(limit)s
"""


def edge_datasets(
    table: str, key: str, outer: str, direction: str, restricted: bool = False
) -> str:
    """The first REF_CAP datasets a job (job_edges) or a run (run_edges) read or wrote, as
    JSON, and how many there are (two columns)."""
    edges = (
        f"(SELECT namespace, name FROM readmodel.{table} "
        f"WHERE {key} = {outer} AND direction = '{direction}')"
    )
    return dataset_refs(edges, "d.namespace, d.name", "", restricted)


# The (namespace, name) rows of what run `%(id)s` read or wrote (`%(direction)s`); of what
# job `%(id)s` read or wrote at `%(as_of)s` (asof.NOW: now, its latest run's and static).
RUN_EDGES_OF = """(SELECT namespace, name FROM readmodel.run_edges
    WHERE run_id = %(id)s AND direction = %(direction)s)"""
JOB_EDGES_OF = f"""(
    SELECT namespace, name FROM {asof.job_edges_at("%(id)s::uuid", "input")} i
    WHERE %(direction)s = 'input'
  UNION ALL
    SELECT namespace, name FROM {asof.job_edges_at("%(id)s::uuid", "output")} o
    WHERE %(direction)s = 'output')"""


def job_datasets_now(job: str, direction: str, restricted: bool = False) -> str:
    """The first REF_CAP datasets job `job` read or wrote now (its latest run's and its
    static lineage, as of asof.NOW, bound as `%(as_of)s`), as JSON, and their count."""
    return dataset_refs(asof.job_edges_at(job, direction), "d.namespace, d.name", "", restricted)


def job_datasets_at(job: str, direction: str, restricted: bool = False) -> str:
    """The datasets job `job` read or wrote as of `%(as_of)s` (under their display names
    then), as JSON, and their count."""
    return dataset_refs(
        asof.job_edges_at(job, direction),
        "coalesce(dn.namespace, d.namespace) AS namespace, coalesce(dn.name, d.name) AS name",
        f"\n          LEFT JOIN LATERAL {asof.display_name_at('d.id')} dn ON true",
        restricted,
    )


def like_substring(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, case-insensitively (compare to lower())."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def like_prefix(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{escaped}%"


# --- one rule everywhere --------------------------------------------------------------
# A run's start: its START eventTime, else (no START seen) its earliest eventTime. `r` is a
# readmodel.runs row (started_at holds START's eventTime, first_seen the earliest).


def started(r: str) -> str:
    return f"coalesce({r}.started_at, {r}.first_seen)"


FAILED_STATE_NAMES = ("FAIL", "ABORT")
FAILED_STATES = f"{FAILED_STATE_NAMES}"


def failed_first(r: str) -> str:
    """0 for a run that failed or aborted, else 1: the first key of sort `failed_first`."""
    return f"CASE WHEN {r}.state IN {FAILED_STATES} THEN 0 ELSE 1 END"


def failed_first_walk(r: str, cursor: bool) -> tuple[str, str]:
    """A `failed_first` page walked along the runs' start (a cursor's a0: failed_first's
    key, a1: the start): the bounds of the walk of failed runs and of the others'. Past a
    cursor among the failed, the others from their first; among them, from it."""
    if not cursor:
        return "", ""
    return (
        f" AND %(a0)s = 0 AND {started(r)} <= %(a1)s",
        f" AND {started(r)} <= CASE WHEN %(a0)s = 1 THEN %(a1)s ELSE 'infinity' END",
    )


def _states(states: set[str]) -> str:
    # (RunState values: checked names, written as literals)
    assert all(s.isalpha() and s.isupper() for s in states)
    return "(" + ", ".join(f"'{s}'" for s in sorted(states)) + ")"


def failed_first_parts(r: str, states: list[str] | None) -> tuple[str, str]:
    """The conditions of a `failed_first` walk's parts, the failed runs' and the others', in
    place of the `state` filter `states`: each part's states written out, so the failed
    part reads runs_failed_started and the planner guesses each part's share (a second
    condition on the state made it guess a hundredth of the rows, and sort them all); a
    part none of `states` is in reads nothing (walked, it would pass every run to find
    none)."""
    if states is None:
        return f" AND {r}.state IN {FAILED_STATES}", f" AND {r}.state NOT IN {FAILED_STATES}"
    failed = {*states} & {*FAILED_STATE_NAMES}
    others = {*states} - failed
    return tuple(  # type: ignore[return-value]
        f" AND {r}.state IN {_states(part)}" if part else " AND false" for part in (failed, others)
    )


def duration(r: str) -> str:
    return f"extract(epoch FROM {r}.ended_at - {started(r)})::float8"


def run_ref(r: str) -> str:
    """A RunRef as JSON of readmodel.runs row `r` (its job's id derives from its name)."""
    return (
        f"json_build_object('id', {r}.id, 'job', json_build_object('id', {r}.job_id, "
        f"'namespace', {r}.job_namespace, 'name', {r}.job_name), 'state', {r}.state)"
    )


def latest_run(r: str) -> str:
    """A LatestRun as JSON of readmodel.runs row `r` (null for a job that never ran)."""
    return (
        f"CASE WHEN {r}.id IS NOT NULL THEN json_build_object('id', {r}.id, "
        f"'state', {r}.state, 'state_time', {r}.state_time, 'started_at', {started(r)}, "
        f"'ended_at', {r}.ended_at, 'duration_seconds', {duration(r)}) END"
    )


def jobs_with_runs(j: str, where: str, as_of: bool, limit: int = limits.EMBEDDED_REFS) -> str:
    """The first `limit` jobs `j` (readmodel.jobs) WHERE `where`, by name, as a JSON array
    of JobRefWithRun: each with its latest run now, or at `%(as_of)s` in its state then."""
    if as_of:
        joins, run = asof.latest_run_at_joins(f"{j}.id"), asof.RUN_AT_JSON
    else:
        joins, run = f"LEFT JOIN readmodel.runs jr ON jr.id = {j}.latest_run_id", latest_run("jr")
    return f"""coalesce((
    SELECT json_agg(json_build_object('id', {j}.id, 'namespace', {j}.namespace,
                                      'name', {j}.name, 'latest_run', {run})
                    ORDER BY {j}.namespace, {j}.name)
    FROM (SELECT {j}.* FROM readmodel.jobs {j} WHERE {where}
          ORDER BY {j}.namespace, {j}.name LIMIT {limit}) {j} {joins}), '[]')::text"""


# --- standard facets surfaced as fields -----------------------------------------------
# Read from a facets column (json) with every shape checked: a facet as a producer sent it
# may have any shape, and a wrong one reads as absent, never as an error.


def _string(value: str) -> str:
    # (json_build_array(x)->>0: the string unquoted, and no braces to trip str.format)
    return f"CASE WHEN json_typeof({value}) = 'string' THEN json_build_array({value})->>0 END"


def description(facets: str) -> str:
    return _string(f"{facets}->'documentation'->'description'")


def dataset_type(facets: str) -> str:
    return _string(f"{facets}->'datasetType'->'datasetType'")


def lifecycle_state(facets: str) -> str:
    return _string(f"{facets}->'lifecycleStateChange'->'lifecycleStateChange'")


def lifecycle_time(facet_times: str) -> str:
    """When the lifecycle facet was reported (facet_times holds [eventTime µs, seq])."""
    return (
        f"timestamptz 'epoch' + ({facet_times}->'lifecycleStateChange'->>0)::bigint "
        "* interval '1 microsecond'"
    )


def lifecycle(state: str, changed_at: str) -> str:
    """A Lifecycle as JSON text (null without a state or its time)."""
    return (
        f"CASE WHEN ({state}) IS NOT NULL AND ({changed_at}) IS NOT NULL THEN "
        f"json_build_object('state', {state}, 'changed_at', {changed_at})::text END"
    )


def lifecycle_now(facets: str, facet_times: str) -> str:
    """A Lifecycle as JSON text from a facets column and its facet_times."""
    return lifecycle(lifecycle_state(facets), lifecycle_time(facet_times))


def _objects(facets: str, facet: str, field: str, build: str, key: str) -> str:
    items = f"{facets}->'{facet}'->'{field}'"
    return f"""coalesce((
    SELECT json_agg({build})
    FROM json_array_elements(CASE WHEN json_typeof({items}) = 'array' THEN {items}
                                  ELSE '[]' END) o
    WHERE json_typeof(o->'{key}') = 'string'), '[]')::text"""


def owners(facets: str) -> str:
    kind = _string("o->'type'")
    build = f"json_build_object('name', o->>'name', 'type', {kind})"
    return _objects(facets, "ownership", "owners", build, "name")


def tags(facets: str) -> str:
    value, source = _string("o->'value'"), _string("o->'source'")
    build = f"json_build_object('key', o->>'key', 'value', {value}, 'source', {source})"
    return _objects(facets, "tags", "tags", build, "key")


# --- what a dataset shows in a list, a graph node and its page --------------------------
# `d` is a readmodel.datasets row.


def name_count(d: str, seen: str = "") -> str:
    """How many names dataset `{d}` has (`seen`: a further condition on them, `c`)."""
    return f"(SELECT count(*) FROM readmodel.dataset_names c WHERE c.dataset_id = {d}.id{seen})"


def lifecycle_as_of(d: str) -> str:
    """A LATERAL subquery (lifecycle_state, lifecycle_time): the latest lifecycle change
    its writers reported by `%(as_of)s`."""
    return f"""(SELECT e.lifecycle_state, e.lifecycle_time
    FROM readmodel.dataset_names w
    JOIN readmodel.run_edges e ON e.namespace = w.namespace AND e.name = w.name
     AND e.direction = 'output' AND e.lifecycle_time <= %(as_of)s
    WHERE w.dataset_id = {d}.id
    ORDER BY e.lifecycle_time DESC LIMIT 1)"""
