"""The DAG of tests/emitters: a SQL task copying table a into b, then a Python task.

Run by `airflow dags test copy_a_to_b` with the pinned Airflow of requirements-airflow.txt;
the `work` connection (AIRFLOW_CONN_WORK) is the suite's throwaway PostgreSQL.
"""

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG


def count_copied() -> int:
    return 2


with DAG(
    dag_id="copy_a_to_b",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    schedule=None,
    catchup=False,
):
    copy = SQLExecuteQueryOperator(
        task_id="copy",
        conn_id="work",
        sql="INSERT INTO b SELECT id, name, amount FROM a",
    )
    check = PythonOperator(task_id="check", python_callable=count_copied)
    copy >> check
