"""Lateness learned from history: a job's cadence (readmodel.job_cadence, learned by the
projector from its runs: projections/cadence.py) and when its next run, or a dataset's next
write, is due, judged at the moment of the read (docs/LATENESS.md).

The fragments here are shared by the job and dataset pages, /jobs and the statistics.
"""

from __future__ import annotations

import msgspec

from metastore.api.models import ExpectedWrite, Lateness
from metastore.api.visibility import mark

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
        'next_expected', k.next_expected, 'late_at', k.late_at, 'missed_at', k.missed_at)::text
    FROM readmodel.job_cadence k WHERE k.job_id = {job_id})"""


# `late` of /jobs: the jobs whose next run is late (or missed) now, or not.
FILTER_LATE = (
    "AND EXISTS (SELECT 1 FROM readmodel.job_cadence k"
    " WHERE k.job_id = j.id AND k.late_at <= now())"
)
FILTER_NOT_LATE = (
    "AND NOT EXISTS (SELECT 1 FROM readmodel.job_cadence k"
    " WHERE k.job_id = j.id AND k.late_at <= now())"
)


def expected_write(writers: str) -> str:
    """A scalar subquery: the ExpectedWrite (JSON text) of the jobs `writers` (a subquery of
    job ids), the one due first among those the reader may see."""
    return f"""(SELECT json_build_object(
        'job', json_build_object('id', wj.id, 'namespace', wj.namespace, 'name', wj.name),
        'status', {status()}, 'expected_at', w.expected_at,
        'late_at', w.expected_at + (k.late_at - k.next_expected))::text
    FROM readmodel.job_cadence k
    JOIN readmodel.jobs wj ON wj.id = k.job_id,
    LATERAL (SELECT k.next_expected
                    + make_interval(secs => coalesce(k.duration_seconds, 0)) AS expected_at) w
    WHERE k.job_id IN {writers}{mark("job", "wj")}
    ORDER BY w.expected_at, wj.namespace, wj.name LIMIT 1)"""


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
