"""Projection `namespaces`: every namespace seen, for jobs and for datasets."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from projections.common import FoldEvent, row_param, rows_select

NAME = "namespaces"
VERSION = 1
TABLES = ("namespaces",)

TYPES = ("text", "boolean", "boolean", "timestamptz", "timestamptz")
UPSERT = f"""
INSERT INTO namespaces AS t (name, has_jobs, has_datasets, first_seen, last_seen)
{rows_select(TYPES)}
ON CONFLICT (name) DO UPDATE SET
    has_jobs = t.has_jobs OR excluded.has_jobs,
    has_datasets = t.has_datasets OR excluded.has_datasets,
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen)
"""


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    seen: dict[str, list[Any]] = {}  # name -> [has_jobs, has_datasets, first, last]

    def see(name: str, jobs: bool, when: dt.datetime) -> None:
        row = seen.get(name)
        if row is None:
            seen[name] = [jobs, not jobs, when, when]
            return
        row[0 if jobs else 1] = True
        row[2] = min(row[2], when)
        row[3] = max(row[3], when)

    for event in events:
        when = event.event_time
        if event.job_namespace:
            see(event.job_namespace, True, when)
        for ref in event.refs:
            see(ref.namespace, False, when)
            for namespace, _, _ in ref.symlinks:
                see(namespace, False, when)
    if not seen:
        return
    names = sorted(seen)
    cur.execute(
        UPSERT,
        row_param(
            TYPES,
            [
                names,
                [seen[n][0] for n in names],
                [seen[n][1] for n in names],
                [seen[n][2] for n in names],
                [seen[n][3] for n in names],
            ],
        ),
    )
