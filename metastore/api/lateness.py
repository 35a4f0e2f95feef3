"""Lateness learned from history: a job's cadence (readmodel.job_cadence, learned by the
projector from its runs: projections/cadence.py) and when its next run, or a dataset's next
write, is due, judged at the moment of the read (docs/LATENESS.md).

The fragments here are shared by the job and dataset pages, /jobs and the statistics.
"""

from __future__ import annotations

import msgspec

from metastore.api.models import ExpectedWrite, Lateness
from metastore.api.visibility import mark
from metastore.cadence_overrides import SETTING

# The overrides of the read connection's session (metastore/cadence_overrides.py), NULL
# when none are configured.
OVERRIDES = f"nullif(current_setting('{SETTING}', true), '')::jsonb"
CONFIGURED = f"coalesce(current_setting('{SETTING}', true), '') <> ''"
# Each job's cadence as a read judges it (alias it): the learned one, or the first
# override whose patterns match the job (its cadence or period, its tolerance; an `ignore`
# leaves the job out: it has no lateness). With no overrides the lateral finds no row.
CADENCE = f"""(SELECT c.job_id, c.namespace, c.basis, c.slots, c.last_expected,
        c.duration_seconds, coalesce(o.cadence, c.cadence) AS cadence,
        coalesce(o.period, c.period_seconds) AS period_seconds,
        coalesce(o.tolerance, c.tolerance_seconds) AS tolerance_seconds,
        x.next_expected, x.late_at,
        CASE WHEN o.matched THEN x.late_at + make_interval(
            secs => coalesce(o.period, c.period_seconds)) ELSE c.missed_at END AS missed_at,
        CASE WHEN o.matched THEN 'override' ELSE 'learned' END AS source
    FROM readmodel.job_cadence c
    LEFT JOIN LATERAL (
        SELECT true AS matched, v.o->>'cadence' AS cadence, (v.o->>'period')::float8 AS period,
               (v.o->>'tolerance')::float8 AS tolerance, (v.o->>'ignore')::boolean AS ignore
        FROM jsonb_array_elements({OVERRIDES}) WITH ORDINALITY AS v(o, i)
        JOIN readmodel.jobs oj ON oj.id = c.job_id
        WHERE {CONFIGURED}  -- (a one-time filter: without overrides, no job is looked up)
          AND oj.namespace LIKE v.o->>'namespace' AND oj.name LIKE v.o->>'name'
        ORDER BY v.i LIMIT 1) o ON true
    CROSS JOIN LATERAL (SELECT
        CASE WHEN o.period IS NULL THEN c.next_expected
             ELSE c.last_expected + make_interval(secs => o.period + c.delay_seconds)
        END AS next_expected) n
    CROSS JOIN LATERAL (SELECT n.next_expected,
        CASE WHEN o.matched THEN n.next_expected + make_interval(
            secs => coalesce(o.tolerance, c.tolerance_seconds)) ELSE c.late_at END AS late_at) x
    WHERE o.ignore IS NOT TRUE)"""

_STATUS = """CASE WHEN now() >= {k}.missed_at THEN 'missed'
                  WHEN now() >= {k}.late_at THEN 'late' ELSE 'on_time' END"""


def status(cadence: str = "k") -> str:
    """The status of readmodel.job_cadence row `cadence` now."""
    return _STATUS.format(k=cadence)


def of_job(job_id: str) -> str:
    """A scalar subquery: the job's Lateness as JSON text (NULL: no cadence learned)."""
    return f"""(SELECT json_build_object(
        'status', {status()}, 'cadence', k.cadence, 'basis', k.basis,
        'period_seconds', k.period_seconds, 'tolerance_seconds', k.tolerance_seconds,
        'learned_from', k.slots, 'last_expected', k.last_expected,
        'next_expected', k.next_expected, 'late_at', k.late_at, 'missed_at', k.missed_at,
        'source', k.source)::text
    FROM {CADENCE} k WHERE k.job_id = {job_id})"""


# The jobs of namespace `namespace` (an expression) late now, rows (job_id, missed):
# without overrides a range of the job_cadence_late index, as the learned late_at is the
# one judged; with them each of the namespace's cadences as judged (CADENCE). (Each
# branch's condition on the setting is a one-time filter: one of them runs.)
def late_jobs(namespace: str) -> str:
    return f"""(SELECT c.job_id, c.missed_at <= now() AS missed FROM readmodel.job_cadence c
     WHERE NOT {CONFIGURED} AND c.namespace = {namespace} AND c.late_at <= now()
   UNION ALL
     SELECT k.job_id, k.missed_at <= now() FROM {CADENCE} k
     WHERE {CONFIGURED} AND k.namespace = {namespace} AND k.late_at <= now())"""


def filter_late(late: bool, overrides: bool) -> str:
    """`late` of /jobs: only the jobs whose next run is late (or missed) now, or only the
    others; `overrides`: whether the api has cadence overrides (else the learned late_at is
    the one judged, and the filter is a plain probe: CADENCE's lateral per job took a count
    of 4,000 late jobs from 2.3 to 8.5 ms)."""
    cadence = CADENCE if overrides else "readmodel.job_cadence"
    return (
        f"AND {'' if late else 'NOT '}EXISTS (SELECT 1 FROM {cadence} k"
        " WHERE k.job_id = j.id AND k.late_at <= now())"
    )


# A writer's ExpectedWrite as JSON text, from its cadence `k`, its job `wj` and when its
# next write is expected (`w`: EXPECTED_AT).
EXPECTED_WRITE = f"""json_build_object(
        'job', json_build_object('id', wj.id, 'namespace', wj.namespace, 'name', wj.name),
        'status', {status()}, 'expected_at', w.expected_at,
        'late_at', w.expected_at + (k.late_at - k.next_expected))::text"""
EXPECTED_AT = """LATERAL (SELECT k.next_expected
                    + make_interval(secs => coalesce(k.duration_seconds, 0)) AS expected_at) w"""


def expected_write(writers: str) -> str:
    """A scalar subquery: the ExpectedWrite (JSON text) of the jobs `writers` (a subquery of
    job ids), the one due first among those the reader may see."""
    return f"""(SELECT {EXPECTED_WRITE}
    FROM {CADENCE} k
    JOIN readmodel.jobs wj ON wj.id = k.job_id,
    {EXPECTED_AT}
    WHERE k.job_id IN {writers}{mark("job", "wj")}
    ORDER BY w.expected_at, wj.namespace, wj.name LIMIT 1)"""


def expected_writes(writers: str) -> str:
    """Rows (dataset_id, next_write) for the datasets of `writers` (a FROM item of rows
    dataset_id, job_id, each pair once): as `expected_write` for each, in one pass. Each
    writer's cadence and job are probed by primary key (the LIMIT keeps the probe a nested
    loop): a hash of every job's cadence would cost the graph the whole table."""
    return f"""SELECT DISTINCT ON (p.dataset_id) p.dataset_id, {EXPECTED_WRITE} AS next_write
    FROM {writers} p
    CROSS JOIN LATERAL (
        SELECT k.*, wj.namespace AS job_namespace, wj.name AS job_name FROM {CADENCE} k
        JOIN readmodel.jobs wj ON wj.id = k.job_id
        WHERE k.job_id = p.job_id{mark("job", "wj")} LIMIT 1) k
    CROSS JOIN LATERAL (SELECT k.job_id AS id, k.job_namespace AS namespace,
                               k.job_name AS name) wj,
    {EXPECTED_AT}
    ORDER BY p.dataset_id, w.expected_at, wj.namespace, wj.name"""


def of_dataset(dataset_id: str) -> str:
    """A scalar subquery: the next write (ExpectedWrite as JSON text) of dataset
    `dataset_id` by its writers now (the jobs with an output edge to one of its names),
    judged now (also as of T): what its page and a graph's node show alike."""
    return expected_write(
        f"""(SELECT e.job_id FROM readmodel.dataset_names n
        JOIN readmodel.job_edges e ON e.namespace = n.namespace AND e.name = n.name
         AND e.direction = 'output'
        WHERE n.dataset_id = {dataset_id})"""
    )


lateness_decoder = msgspec.json.Decoder(Lateness | None)
expected_write_decoder = msgspec.json.Decoder(ExpectedWrite | None)


def decode_lateness(text: str | None) -> Lateness | None:
    return lateness_decoder.decode(text) if text else None


def decode_expected_write(text: str | None) -> ExpectedWrite | None:
    return expected_write_decoder.decode(text) if text else None
