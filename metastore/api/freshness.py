"""A dataset's freshness, now or as of a moment: one statement for the datasets of a graph.

Its last successful write, the latest failed attempt after it, and why it is stale: a
writer's latest run failed after that write, or a dataset its writers read (one hop) was
successfully written after it. Now, from the job edges (the projection keeps each
edge's latest write and failed attempt: projections/lineage.py); as of T, from the run
edges and runs by then, with the jobs' edges at T (asof.py).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection
from typing import Any

from psycopg import AsyncConnection

from metastore.api import asof, models
from metastore.api.db import rows

# Rows (dataset_id, job_id, write_at, run_id, attempt_at, attempt_run, attempt_state) of
# the output edges of the datasets in `%(datasets)s` (its latest write and failed attempt
# of each: now, a job edge; as of T, a run edge, its write by T and its failure by T).
OUTS_NOW = """
SELECT n.dataset_id, e.job_id, e.last_write_at AS write_at, e.last_write_run AS run_id,
       e.attempt_at, e.attempt_run, e.attempt_state
FROM readmodel.dataset_names n
JOIN readmodel.job_edges e
  ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'
WHERE n.dataset_id = ANY(%(datasets)s::uuid[])"""
# (a run whose writes span T counts from its first: see run_edges.first_write_at)
OUTS_AS_OF = """
SELECT n.dataset_id, re.job_id,
       CASE WHEN re.last_write_at <= %(as_of)s THEN re.last_write_at
            WHEN re.first_write_at <= %(as_of)s THEN re.first_write_at END AS write_at,
       re.run_id, lr.failed_at AS attempt_at, lr.run_id AS attempt_run,
       lr.failed_state AS attempt_state
FROM readmodel.dataset_names n
JOIN readmodel.run_edges re
  ON re.namespace = n.namespace AND re.name = n.name AND re.direction = 'output'
LEFT JOIN readmodel.lineage_runs lr ON lr.run_id = re.run_id AND lr.failed_at <= %(as_of)s
WHERE n.dataset_id = ANY(%(datasets)s::uuid[]) AND re.first_seen <= %(as_of)s"""
# The writes of the writers' inputs (rows dataset_id, write_at, run_id), as above.
INPUT_OUTS_NOW = """
SELECT n.dataset_id, e.last_write_at AS write_at, e.last_write_run AS run_id
FROM readmodel.dataset_names n
JOIN readmodel.job_edges e
  ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'
WHERE n.dataset_id = ANY(ARRAY(SELECT DISTINCT input FROM inputs
                               WHERE input <> ALL(%(datasets)s::uuid[])))"""
INPUT_OUTS_AS_OF = """
SELECT n.dataset_id,
       CASE WHEN re.last_write_at <= %(as_of)s THEN re.last_write_at
            ELSE re.first_write_at END AS write_at, re.run_id
FROM readmodel.dataset_names n
JOIN readmodel.run_edges re
  ON re.namespace = n.namespace AND re.name = n.name AND re.direction = 'output'
WHERE n.dataset_id = ANY(ARRAY(SELECT DISTINCT input FROM inputs
                               WHERE input <> ALL(%(datasets)s::uuid[])))
  AND re.first_write_at <= %(as_of)s"""
# The writers of each dataset (rows dataset_id, job_id): now every job with an output
# edge to it; as of T, those whose edge held then (asof.EDGE_HELD, with each job's latest
# run by T looked up once: `latest`).
PAIRS_NOW = "SELECT DISTINCT dataset_id, job_id FROM outs"
LATEST_AS_OF = f"""
candidates AS MATERIALIZED (
    SELECT n.dataset_id, e.job_id, e.direction, e.namespace, e.name, e.source, e.first_seen
    FROM readmodel.dataset_names n
    JOIN readmodel.job_edges e
      ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'
    WHERE n.dataset_id = ANY(%(datasets)s::uuid[])),
latest AS MATERIALIZED (
    SELECT j.job_id, lr.run_id, lr.failed_at, lr.last_complete
    FROM (SELECT DISTINCT job_id FROM candidates) j
    LEFT JOIN readmodel.lineage_runs lr ON lr.run_id = {asof.latest_run("j.job_id")}),"""
PAIRS_AS_OF = """
SELECT DISTINCT c.dataset_id, c.job_id
FROM candidates c JOIN latest l ON l.job_id = c.job_id
WHERE CASE WHEN c.source = 'static' THEN c.first_seen <= %(as_of)s
    ELSE EXISTS (SELECT 1 FROM readmodel.run_edges re
                 WHERE re.run_id = l.run_id AND re.direction = c.direction
                   AND re.namespace = c.namespace AND re.name = c.name) END"""
# The writers whose latest run failed (rows job_id, at, run): now, its latest run; as of
# T, its latest run started by then, failed by then and not completed after that.
FAILED_NOW = """
SELECT j.id AS job_id, r.state_time AS at, r.id AS run
FROM (SELECT DISTINCT job_id FROM pairs) w
JOIN readmodel.jobs j ON j.id = w.job_id
JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE r.state IN ('FAIL', 'ABORT')"""
FAILED_AS_OF = """
SELECT l.job_id, l.failed_at AS at, l.run_id AS run
FROM latest l
WHERE l.job_id IN (SELECT job_id FROM pairs) AND l.failed_at <= %(as_of)s
  AND (l.last_complete IS NULL OR l.last_complete > %(as_of)s
       OR l.last_complete < l.failed_at)"""
# The datasets the writers read (rows job_id, input): now all their input edges, as of T
# those of then (asof.JOB_EDGES_AT: their latest run's, and static ones declared by then).
INPUTS_NOW = """
SELECT DISTINCT w.job_id, n.dataset_id AS input
FROM (SELECT DISTINCT job_id FROM pairs) w
JOIN readmodel.job_edges e ON e.job_id = w.job_id AND e.direction = 'input'
JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name"""
INPUTS_AS_OF = """
SELECT DISTINCT e.job_id, n.dataset_id AS input
FROM (
    SELECT l.job_id, re.namespace, re.name
    FROM latest l JOIN readmodel.run_edges re ON re.run_id = l.run_id AND re.direction = 'input'
    WHERE l.job_id IN (SELECT job_id FROM pairs)
  UNION ALL
    SELECT s.job_id, s.namespace, s.name FROM readmodel.job_edges s
    WHERE s.job_id IN (SELECT job_id FROM pairs) AND s.direction = 'input'
      AND s.source = 'static' AND s.first_seen <= %(as_of)s) e
JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name"""

# Rows (kind, dataset_id, at, run, its job id, namespace, name and state, attempt state,
# input id, namespace, name) for the datasets in `%(datasets)s`: `write`, their latest
# write; `attempt`, a failed attempt after it; `writer_failed` and `input_rewritten`,
# why they are stale. Set-based over the datasets of a whole graph: a writer or an input
# several of them share is looked up once (per node, it was most of the graph's cost).
FRESHNESS = """
WITH outs AS MATERIALIZED ({outs}),
writes AS MATERIALIZED (
    SELECT DISTINCT ON (dataset_id) dataset_id, write_at AS at, run_id AS run FROM outs
    WHERE write_at IS NOT NULL ORDER BY dataset_id, write_at DESC, run_id DESC),
{latest}
pairs AS MATERIALIZED ({pairs}),
failed AS MATERIALIZED ({failed}),
inputs AS MATERIALIZED ({inputs}),
input_writes AS MATERIALIZED (
    -- (an input that is one of the datasets asked about: its write is known already)
    SELECT dataset_id AS input, at, run FROM writes
    WHERE dataset_id IN (SELECT input FROM inputs)
  UNION ALL
    SELECT * FROM (
        SELECT DISTINCT ON (dataset_id) dataset_id AS input, write_at AS at, run_id AS run
        FROM ({input_outs}) o
        WHERE write_at IS NOT NULL ORDER BY dataset_id, write_at DESC, run_id DESC) o),
found AS (
    SELECT 'write' AS kind, dataset_id, at, run, NULL::text AS state, NULL::uuid AS input
    FROM writes
  UNION ALL
    SELECT * FROM (
        SELECT DISTINCT ON (o.dataset_id) 'attempt', o.dataset_id, o.attempt_at,
               o.attempt_run, o.attempt_state, NULL::uuid
        FROM outs o LEFT JOIN writes w ON w.dataset_id = o.dataset_id
        WHERE o.attempt_at IS NOT NULL AND (w.at IS NULL OR o.attempt_at > w.at)
        ORDER BY o.dataset_id, o.attempt_at DESC, o.attempt_run DESC) a
  UNION ALL
    SELECT DISTINCT 'writer_failed', p.dataset_id, f.at, f.run, NULL, NULL::uuid
    FROM pairs p
    JOIN failed f ON f.job_id = p.job_id
    LEFT JOIN writes w ON w.dataset_id = p.dataset_id
    WHERE w.at IS NULL OR f.at > w.at
  UNION ALL
    SELECT DISTINCT 'input_rewritten', p.dataset_id, iw.at, iw.run, NULL, i.input
    FROM pairs p
    JOIN inputs i ON i.job_id = p.job_id
    JOIN input_writes iw ON iw.input = i.input
    JOIN writes w ON w.dataset_id = p.dataset_id
    WHERE i.input <> p.dataset_id AND iw.at > w.at)
SELECT f.kind, f.dataset_id, f.at, f.run, r.job_id, r.job_namespace, r.job_name, r.state,
       f.state, f.input, {input_name}
FROM found f
LEFT JOIN readmodel.runs r ON r.id = f.run{input_join}
"""


def _statement(as_of: bool) -> str:
    if as_of:
        input_name = "dn.namespace, dn.name"
        input_join = f"\nLEFT JOIN LATERAL {asof.display_name_at('f.input')} dn ON true"
    else:
        input_name = "dd.namespace, dd.name"
        input_join = "\nLEFT JOIN readmodel.datasets dd ON dd.id = f.input"
    return FRESHNESS.format(
        outs=OUTS_AS_OF if as_of else OUTS_NOW,
        latest=LATEST_AS_OF if as_of else "",
        pairs=PAIRS_AS_OF if as_of else PAIRS_NOW,
        failed=FAILED_AS_OF if as_of else FAILED_NOW,
        inputs=INPUTS_AS_OF if as_of else INPUTS_NOW,
        input_outs=INPUT_OUTS_AS_OF if as_of else INPUT_OUTS_NOW,
        input_name=input_name,
        input_join=input_join,
    )


FRESHNESS_NOW = _statement(as_of=False)
FRESHNESS_AS_OF = _statement(as_of=True)
NOTHING = models.DatasetFreshness(
    last_write=None, failed_attempt=None, stale=False, stale_reasons=[]
)


def _run(r: Any) -> models.RunRef:
    job = models.JobRef(id=r[4], namespace=r[5], name=r[6]) if r[4] is not None else None
    return models.RunRef(id=r[3], job=job, state=r[7])


def statement(as_of: dt.datetime | None) -> str:
    return FRESHNESS_NOW if as_of is None else FRESHNESS_AS_OF


def build(
    found: list[Any], datasets: Collection[uuid.UUID]
) -> dict[uuid.UUID, models.DatasetFreshness]:
    """The freshness of each of `datasets` from the rows of `statement`."""
    writes: dict[uuid.UUID, models.Write] = {}
    attempts: dict[uuid.UUID, models.FailedAttempt] = {}
    reasons: dict[uuid.UUID, list[models.StaleReason]] = {}
    for r in found:
        kind, dataset = r[0], r[1]
        if kind == "write":
            writes[dataset] = models.Write(run=_run(r), at=r[2])
        elif kind == "attempt":
            attempts[dataset] = models.FailedAttempt(run=_run(r), state=r[8], at=r[2])
        else:
            ref = None
            if r[9] is not None:
                ref = models.DatasetRef(id=r[9], namespace=r[10], name=r[11])
            reasons.setdefault(dataset, []).append(
                models.StaleReason(reason=kind, at=r[2], run=_run(r), dataset=ref)
            )
    answer = {}
    for dataset in datasets:
        why = sorted(reasons.get(dataset, ()), key=lambda x: (x.reason, x.run.id))
        why.sort(key=lambda x: x.at, reverse=True)  # (stable: the latest first, then as above)
        answer[dataset] = models.DatasetFreshness(
            last_write=writes.get(dataset),
            failed_attempt=attempts.get(dataset),
            stale=bool(why),
            stale_reasons=why,
        )
    return answer


async def of(
    conn: AsyncConnection[Any], datasets: Collection[uuid.UUID], as_of: dt.datetime | None
) -> dict[uuid.UUID, models.DatasetFreshness]:
    """The freshness of each of `datasets` (ids that answer as themselves, not merged), now
    or as of `as_of`."""
    if not datasets:
        return {}
    found = await rows(conn, statement(as_of), {"datasets": list(datasets), "as_of": as_of})
    return build(found, datasets)
