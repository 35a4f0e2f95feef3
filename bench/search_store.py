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
# Fields of dataset i's current schema, `fields` of them (k = 0, 1, ...) in turn: `{word}_id`,
# `total_{word}`, `col_{i}_{k}` (a field no other has), `note_{k}` described "The {word}
# remark": a word is in about a tenth of each kind, as names share a vocabulary.
FIELDS = """
INSERT INTO readmodel.dataset_fields (dataset_id, name, description)
SELECT md5('d' || i)::uuid,
       CASE k %% 4 WHEN 0 THEN (%(words)s::text[])[1 + (i + k + 3) %% 10] || '_id'
                   WHEN 1 THEN 'total_' || (%(words)s::text[])[1 + (i / 10 + k) %% 10]
                   WHEN 2 THEN 'col_' || i || '_' || k
                   ELSE 'note_' || k END,
       CASE WHEN k %% 4 = 3
            THEN 'The ' || (%(words)s::text[])[1 + (i / 100 + k) %% 10] || ' remark' END
FROM generate_series(0, %(datasets)s - 1) i, generate_series(0, %(fields)s - 1) k
"""


# Words the fields have and the names have not: a field name's part shared by a quarter of
# the fields, a prefix of a tenth, a word of a description alone, a whole field name, a
# field no other has.
FIELD_WORDS = ["_id", "total", "remark", "total_sales", "col_7_2"]


def seed(conn: psycopg.Connection[Any], datasets: int, jobs: int, fields: int = 0) -> None:
    """Writes `datasets` datasets (two names each, `fields` fields each) and `jobs` jobs into
    empty read models."""
    args = {
        "words": WORDS,
        "datasets": datasets,
        "jobs": jobs,
        "spark": SPARK_NAMESPACE,
        "hive": HIVE_NAMESPACE,
        "job_ns": JOB_NAMESPACE,
        "fields": fields,
    }
    for statement in [*SEED[:-1], FIELDS, SEED[-1]] if fields else SEED:
        conn.execute(statement, args if "%(" in statement else None)
