"""Each job's cadence learned from its own runs (the runs projection's `job_cadence`).

Method (docs/LATENESS.md): a job's latest RECENT_RUNS runs by start give its scheduled
times, the runs' nominalTime when most have one (a retry shares its slot), else their
start times. The median gap between consecutive times is its period; it is `regular` when
90 % of the gaps are within REGULAR_SPREAD of it (named hourly, daily or weekly near those),
else `irregular`. The next run is expected a period after the latest time (plus the median
start delay after nominalTime); it is late past a tolerance learned from the job's jitter
(the spread of its start delays, else of its gaps; an irregular job's: its longest usual
gap), and missed when the slot after that has passed too. Refolded from the stored runs of
the jobs a batch touched, after the runs are written: the row depends on the stored runs
only, so the order of events never matters.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

import psycopg

from metastore.pgarray import uuid_array

RECENT_RUNS = 60
MIN_SLOTS = 4  # 3 gaps: fewer say nothing of a cadence
REGULAR_SPREAD = 0.1  # of the period
JITTER_FACTOR = 3.0  # tolerance: this many times the jitter's 95th percentile...
MIN_TOLERANCE = 60.0  # ...and at least a minute and TOLERANCE_SHARE of the period
TOLERANCE_SHARE = 0.05
IRREGULAR_MARGIN = 1.1  # an irregular job is late past its 95th percentile gap and a tenth
HOUR, DAY, WEEK = 3600.0, 86400.0, 604800.0
NAMED = {"hourly": HOUR, "daily": DAY, "weekly": WEEK}

_NAMED_CASE = " ".join(
    f"WHEN abs(c.period - {seconds}) <= {REGULAR_SPREAD} * {seconds} THEN '{name}'"
    for name, seconds in NAMED.items()
)

LEARN = f"""
WITH touched(job_id) AS (SELECT DISTINCT unnest(%b::uuid[])),
recent AS (
    SELECT t.job_id, r.job_namespace, r.nominal_start, r.started, r.duration
    FROM touched t CROSS JOIN LATERAL (
        SELECT r.job_namespace, r.nominal_start, coalesce(r.started_at, r.first_seen) AS started,
               CASE WHEN r.state = 'COMPLETE' AND r.started_at IS NOT NULL
                    THEN extract(epoch FROM r.ended_at - r.started_at) END AS duration
        FROM runs r WHERE r.job_id = t.job_id
        ORDER BY coalesce(r.started_at, r.first_seen) DESC, r.id DESC LIMIT {RECENT_RUNS}) r
),
basis AS (
    SELECT job_id, min(job_namespace) AS namespace,
           count(nominal_start) * 2 > count(*) AS nominal,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY duration) AS duration
    FROM recent GROUP BY job_id
),
slots AS (
    SELECT r.job_id, CASE WHEN b.nominal THEN r.nominal_start ELSE r.started END AS at,
           CASE WHEN b.nominal THEN min(extract(epoch FROM r.started - r.nominal_start)) END
               AS delay
    FROM recent r JOIN basis b USING (job_id)
    WHERE NOT b.nominal OR r.nominal_start IS NOT NULL
    GROUP BY 1, 2, b.nominal
),
gaps AS (
    SELECT job_id, at, delay,
           extract(epoch FROM at - lag(at) OVER (PARTITION BY job_id ORDER BY at)) AS gap
    FROM slots
),
centre AS (
    SELECT job_id, count(*) AS slots, max(at) AS last_at,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY gap) AS period,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY gap) AS gap_p95,
           coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY delay), 0) AS delay
    FROM gaps GROUP BY job_id HAVING count(*) >= {MIN_SLOTS}
),
spread AS (
    -- jitter: of the start delays after nominalTime, else of the gaps (a gap of a missed
    -- run, 1.5 periods or more, is no jitter)
    SELECT c.job_id,
           percentile_cont(0.9) WITHIN GROUP (ORDER BY abs(g.gap - c.period)) AS gap_spread,
           coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY abs(g.delay - c.delay)),
                    percentile_cont(0.95) WITHIN GROUP (ORDER BY abs(g.gap - c.period))
                        FILTER (WHERE g.gap < 1.5 * c.period)) AS jitter
    FROM centre c JOIN gaps g USING (job_id)
    WHERE g.gap IS NOT NULL
    GROUP BY c.job_id
),
learned AS (
    SELECT c.job_id, b.namespace, b.nominal, c.slots, c.last_at, c.period, c.delay, b.duration,
           CASE WHEN s.gap_spread > {REGULAR_SPREAD} * c.period THEN 'irregular'
                {_NAMED_CASE} ELSE 'regular' END AS cadence,
           CASE WHEN s.gap_spread > {REGULAR_SPREAD} * c.period
                -- irregular: no later than its longest usual gaps, and a margin
                THEN greatest({IRREGULAR_MARGIN} * c.gap_p95 - c.period,
                              {TOLERANCE_SHARE} * c.period, {MIN_TOLERANCE})
                ELSE greatest({JITTER_FACTOR} * coalesce(s.jitter, 0),
                              {TOLERANCE_SHARE} * c.period, {MIN_TOLERANCE})
           END AS tolerance
    FROM centre c JOIN basis b USING (job_id) JOIN spread s USING (job_id)
    WHERE c.period > 0
),
gone AS (
    DELETE FROM job_cadence k USING touched t
    WHERE k.job_id = t.job_id AND NOT EXISTS (SELECT 1 FROM learned l WHERE l.job_id = t.job_id)
)
INSERT INTO job_cadence AS k (job_id, namespace, basis, cadence, period_seconds, delay_seconds,
    tolerance_seconds, duration_seconds, slots, last_expected, next_expected, late_at,
    missed_at)
SELECT l.job_id, l.namespace, CASE WHEN l.nominal THEN 'nominal' ELSE 'start' END,
       l.cadence, l.period, l.delay, l.tolerance, l.duration, l.slots, l.last_at, n.next_expected,
       n.next_expected + make_interval(secs => l.tolerance),
       n.next_expected + make_interval(secs => l.tolerance + l.period)
FROM learned l,
     LATERAL (SELECT l.last_at + make_interval(secs => l.period + l.delay) AS next_expected) n
ON CONFLICT (job_id) DO UPDATE SET
    namespace = excluded.namespace, basis = excluded.basis, cadence = excluded.cadence,
    period_seconds = excluded.period_seconds, delay_seconds = excluded.delay_seconds,
    tolerance_seconds = excluded.tolerance_seconds,
    duration_seconds = excluded.duration_seconds, slots = excluded.slots,
    last_expected = excluded.last_expected, next_expected = excluded.next_expected,
    late_at = excluded.late_at, missed_at = excluded.missed_at
-- (a cadence learned again as it was is left as it is: no new row version, no index entries)
WHERE (k.namespace, k.basis, k.cadence, k.period_seconds, k.delay_seconds, k.tolerance_seconds,
       k.duration_seconds, k.slots, k.last_expected, k.next_expected, k.late_at, k.missed_at)
    IS DISTINCT FROM (excluded.namespace, excluded.basis, excluded.cadence,
       excluded.period_seconds, excluded.delay_seconds, excluded.tolerance_seconds,
       excluded.duration_seconds, excluded.slots, excluded.last_expected, excluded.next_expected,
       excluded.late_at, excluded.missed_at)
"""


def learn(cur: psycopg.Cursor[Any], job_ids: Collection[uuid.UUID]) -> None:
    """Learns again the cadence of `job_ids` from their stored runs (after they are written)."""
    if job_ids:
        cur.execute(LEARN, (uuid_array(job_ids),))
