"""A dataset's freshness, now or as of a moment: one SQL expression giving it as JSON.

Its last successful write, the latest failed attempt after it, and why it is stale: a
writer's latest run failed after that write, or a dataset its writers read (one hop) was
successfully written after it. Now, from the job edges (the projection keeps each
edge's latest write and failed attempt: projections/lineage.py); as of T, from the run
edges and runs by then, with the jobs' edges at T (asof.py).
"""

from __future__ import annotations

import msgspec

from metastore.api import asof, models
from metastore.api.sqlparts import run_ref

# The latest write, the latest failed attempt and the writers of dataset `{d}`: columns
# w_at, w_run, a_at, a_run, a_state, writers (an array of job ids).
WRITES_NOW = """
SELECT max(e.last_write_at) AS w_at,
       (array_agg(e.last_write_run ORDER BY e.last_write_at DESC NULLS LAST,
                  e.last_write_run DESC))[1] AS w_run,
       max(e.attempt_at) AS a_at,
       (array_agg(e.attempt_run ORDER BY e.attempt_at DESC NULLS LAST,
                  e.attempt_run DESC))[1] AS a_run,
       (array_agg(e.attempt_state ORDER BY e.attempt_at DESC NULLS LAST,
                  e.attempt_run DESC))[1] AS a_state,
       array_agg(DISTINCT e.job_id) AS writers
FROM readmodel.dataset_names n
JOIN readmodel.job_edges e
  ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'
WHERE n.dataset_id = {d}"""
# The latest write of dataset `{d}` (columns at, run): now, and as of T (a run whose
# writes span T counts from its first; see run_edges.first_write_at).
LAST_WRITE_NOW = """
SELECT e.last_write_at AS at, e.last_write_run AS run
FROM readmodel.dataset_names n
JOIN readmodel.job_edges e
  ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'
WHERE n.dataset_id = {d} AND e.last_write_at IS NOT NULL
ORDER BY e.last_write_at DESC, e.last_write_run DESC LIMIT 1"""
LAST_WRITE_AS_OF = """
SELECT t.at, re.run_id AS run
FROM readmodel.dataset_names n
JOIN readmodel.run_edges re
  ON re.namespace = n.namespace AND re.name = n.name AND re.direction = 'output'
CROSS JOIN LATERAL (SELECT CASE WHEN re.last_write_at <= %(as_of)s THEN re.last_write_at
                                ELSE re.first_write_at END AS at) t
WHERE n.dataset_id = {d} AND re.first_write_at <= %(as_of)s
ORDER BY t.at DESC, re.run_id DESC LIMIT 1"""
ATTEMPT_AS_OF = """
SELECT lr.failed_at AS at, lr.run_id AS run, lr.failed_state AS state
FROM readmodel.dataset_names n
JOIN readmodel.run_edges re
  ON re.namespace = n.namespace AND re.name = n.name AND re.direction = 'output'
JOIN readmodel.lineage_runs lr ON lr.run_id = re.run_id
WHERE n.dataset_id = {d} AND lr.failed_at <= %(as_of)s
ORDER BY lr.failed_at DESC, lr.run_id DESC LIMIT 1"""
WRITES_AS_OF = f"""
SELECT w.at AS w_at, w.run AS w_run, a.at AS a_at, a.run AS a_run, a.state AS a_state,
       ARRAY(SELECT DISTINCT e.job_id FROM readmodel.dataset_names n
             JOIN readmodel.job_edges e
               ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'
             WHERE n.dataset_id = {{d}} AND {asof.edge_held()}) AS writers
FROM (SELECT 1) one
LEFT JOIN LATERAL ({LAST_WRITE_AS_OF}) w ON true
LEFT JOIN LATERAL ({ATTEMPT_AS_OF}) a ON true"""

# Rows (at, run, dataset): the writers in `f.writers` whose latest run failed after the
# write `f.w_at` (now; as of T: its latest run started by then, failed by then and not
# completed after that failure by then).
WRITER_FAILED_NOW = """
SELECT r.state_time AS at, r.id AS run, NULL::uuid AS dataset
FROM unnest(f.writers) AS wj(id)
JOIN readmodel.jobs j ON j.id = wj.id
JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE r.state IN ('FAIL', 'ABORT') AND (f.w_at IS NULL OR r.state_time > f.w_at)"""
WRITER_FAILED_AS_OF = f"""
SELECT lr.failed_at AS at, lr.run_id AS run, NULL::uuid AS dataset
FROM unnest(f.writers) AS wj(id)
JOIN readmodel.lineage_runs lr ON lr.run_id = {asof.latest_run("wj.id")}
WHERE lr.failed_at <= %(as_of)s
  AND (lr.last_complete IS NULL OR lr.last_complete > %(as_of)s
       OR lr.last_complete < lr.failed_at)
  AND (f.w_at IS NULL OR lr.failed_at > f.w_at)"""
# Rows (at, run, dataset): the datasets the writers read (their input edges: all now, at
# T as of T) written after `f.w_at`, and the write.
INPUT_REWRITTEN = """
SELECT iw.at, iw.run, i.dataset_id AS dataset
FROM (SELECT DISTINCT n.dataset_id FROM unnest(f.writers) AS wj(id)
      CROSS JOIN LATERAL {inputs} ie
      JOIN readmodel.dataset_names n ON n.namespace = ie.namespace AND n.name = ie.name) i
CROSS JOIN LATERAL ({last_write}) iw
WHERE f.w_at IS NOT NULL AND i.dataset_id <> {d} AND iw.at > f.w_at"""
INPUTS_NOW = """(
    SELECT e.namespace, e.name FROM readmodel.job_edges e
    WHERE e.job_id = wj.id AND e.direction = 'input')"""

FRESHNESS = """(
SELECT json_build_object(
    'last_write', CASE WHEN f.w_at IS NOT NULL
        THEN json_build_object('run', {w_run}, 'at', f.w_at) END,
    'failed_attempt', CASE WHEN f.a_at IS NOT NULL AND (f.w_at IS NULL OR f.a_at > f.w_at)
        THEN json_build_object('run', {a_run}, 'state', f.a_state, 'at', f.a_at) END,
    'stale', x.reasons IS NOT NULL,
    'stale_reasons', coalesce(x.reasons, '[]'::json))::text
FROM ({writes}) f
CROSS JOIN LATERAL (
    SELECT json_agg(json_build_object(
               'reason', r.reason, 'at', r.at, 'run', {r_run},
               'dataset', CASE WHEN r.dataset IS NOT NULL THEN {r_dataset} END)
           ORDER BY r.at DESC, r.reason, r.run) AS reasons
    FROM (SELECT 'writer_failed' AS reason, * FROM ({writer_failed}) wf
          UNION ALL
          SELECT 'input_rewritten', * FROM ({input_rewritten}) ir) r
) x)"""

RUN_REF = "(SELECT {ref} FROM readmodel.runs rr WHERE rr.id = {run})"


def _run(run: str) -> str:
    return RUN_REF.format(ref=run_ref("rr"), run=run)


def dataset_ref(dataset: str, as_of: bool) -> str:
    """A DatasetRef as JSON of dataset id `dataset`, under its display name (as of T)."""
    if as_of:
        return (
            f"(SELECT json_build_object('id', {dataset}, 'namespace', dn.namespace, "
            f"'name', dn.name) FROM {asof.display_name_at(dataset)} dn)"
        )
    return (
        "(SELECT json_build_object('id', dd.id, 'namespace', dd.namespace, 'name', dd.name) "
        f"FROM readmodel.datasets dd WHERE dd.id = {dataset})"
    )


def freshness(d: str, as_of: bool) -> str:
    """The freshness of dataset id `d` as JSON text (a DatasetFreshness): now, or as of
    `%(as_of)s`."""
    last_write = LAST_WRITE_AS_OF if as_of else LAST_WRITE_NOW
    inputs = asof.job_edges_at("wj.id", "input") if as_of else INPUTS_NOW
    return FRESHNESS.format(
        writes=(WRITES_AS_OF if as_of else WRITES_NOW).format(d=d),
        writer_failed=WRITER_FAILED_AS_OF if as_of else WRITER_FAILED_NOW,
        input_rewritten=INPUT_REWRITTEN.format(
            inputs=inputs, last_write=last_write.format(d="i.dataset_id"), d=d
        ),
        w_run=_run("f.w_run"),
        a_run=_run("f.a_run"),
        r_run=_run("r.run"),
        r_dataset=dataset_ref("r.dataset", as_of),
    )


decode = msgspec.json.Decoder(models.DatasetFreshness).decode
