"""A store of names for search: datasets with a Spark and a Hive name each, and jobs.

Names are written straight into the read models (`seed`), from ten words and a number,
so a word is in a fifth of the names and a number in few: what a search box meets on a
platform's store. Used by tests/test_search.py and the search scenario
(bench/scenarios/search.py).
"""

from __future__ import annotations

from typing import Any

import psycopg

WORDS = ["orders", "items", "sales", "stock", "clicks", "users", "prices", "fleet", "audit"]
WORDS += ["churn"]
SPARK_NAMESPACE, HIVE_NAMESPACE, JOB_NAMESPACE = "s3a://warehouse", "hive://hms:9083", "spark"
# Dataset i: Hive `db{i % 7}.{word}_{word}_{i}` (its display name), Spark
# `db{i % 7}.db/{word}_{word}_{i}`; job i: `etl_{word}.insert_into_{word}_{i}`.
SEED = [
    """
INSERT INTO readmodel.datasets (id, namespace, name, first_seen, last_seen, first_tx,
                                first_seq, home_namespace, home_name)
SELECT md5('d' || i)::uuid, %(hive)s, name, now(), now(), i, 0, %(spark)s, name
FROM (SELECT i, 'db' || i %% 7 || '.' || (%(words)s::text[])[1 + i %% 10] || '_'
                || (%(words)s::text[])[1 + i / 10 %% 10] || '_' || i AS name
      FROM generate_series(0, %(datasets)s - 1) i) d
""",
    """
INSERT INTO readmodel.dataset_names (namespace, name, dataset_id, kind, first_seen)
SELECT %(spark)s, replace(name, '.', '.db/'), id, 'emitted', now() FROM readmodel.datasets
UNION ALL
SELECT namespace, name, id, 'symlink', now() FROM readmodel.datasets
""",
    """
INSERT INTO readmodel.jobs (id, namespace, name, first_seen, last_seen)
SELECT md5('j' || i)::uuid, %(job_ns)s,
       'etl_' || (%(words)s::text[])[1 + i %% 10] || '.insert_into_'
       || (%(words)s::text[])[1 + i / 10 %% 10] || '_' || i, now(), now()
FROM generate_series(0, %(jobs)s - 1) i
""",
    """
INSERT INTO readmodel.namespaces (name, first_seen, last_seen)
SELECT unnest(ARRAY[%(spark)s, %(hive)s, %(job_ns)s]), now(), now()
""",
    "ANALYZE",
]


def seed(conn: psycopg.Connection[Any], datasets: int, jobs: int) -> None:
    """Writes `datasets` datasets (two names each) and `jobs` jobs into empty read models."""
    args = {
        "words": WORDS,
        "datasets": datasets,
        "jobs": jobs,
        "spark": SPARK_NAMESPACE,
        "hive": HIVE_NAMESPACE,
        "job_ns": JOB_NAMESPACE,
    }
    for statement in SEED:
        conn.execute(statement, args if "%(" in statement else None)
