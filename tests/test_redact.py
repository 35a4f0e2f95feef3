"""Credentials never reach the log: ingest masks them before the append (metastore/redact.py).

A table of real-world shapes (Spark's properties, JDBC URLs of PostgreSQL, MySQL, SQL
Server and Oracle, S3/Azure/GCS keys, Kafka's JAAS config, Airflow connection URIs,
environment variables), what must stay (access key ids, column names, counts, emails),
then through a real `metastore api` and `metastore projector`: the log row, the export feed
and the read API hold no secret, and say where one was masked.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from metastore.envelope import EnvelopeError, parse_event
from metastore.redact import FACET, MARKER, may_hold_secrets, redact
from tests.conftest import Server
from tests.support import (
    CONFORMANCE,
    conformance_files,
    run_event,
    serving,
    wait_until_folded,
)

SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
PROPERTIES = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"
SECRET = "hunter2-S3cr3t"  # every credential below; the log must never hold it

# (what a producer sent, what the log must hold instead)
STRINGS = [
    (f"postgres://etl:{SECRET}@db.prod:5432", f"postgres://etl:{MARKER}@db.prod:5432"),
    (f"redis://:{SECRET}@cache:6379/0", f"redis://:{MARKER}@cache:6379/0"),
    (f"mongodb://etl:p@ss:{SECRET}@mongo/db", f"mongodb://etl:{MARKER}@mongo/db"),
    (
        f"jdbc:postgresql://db:5432/sales?user=etl&password={SECRET}&ssl=true",
        f"jdbc:postgresql://db:5432/sales?user=etl&password={MARKER}&ssl=true",
    ),
    (f"jdbc:mysql://etl:{SECRET}@db:3306/sales", f"jdbc:mysql://etl:{MARKER}@db:3306/sales"),
    (
        f"jdbc:sqlserver://db:1433;databaseName=sales;user=etl;password={SECRET};encrypt=true",
        f"jdbc:sqlserver://db:1433;databaseName=sales;user=etl;password={MARKER};encrypt=true",
    ),
    (f"jdbc:oracle:thin:etl/{SECRET}@db:1521/ORCL", f"jdbc:oracle:thin:etl/{MARKER}@db:1521/ORCL"),
    (
        f"Server=db;Database=sales;User Id=etl;Pwd={SECRET};",
        f"Server=db;Database=sales;User Id=etl;Pwd={MARKER};",
    ),
    (
        f"postgresql+psycopg2://airflow:{SECRET}@postgres/airflow",
        f"postgresql+psycopg2://airflow:{MARKER}@postgres/airflow",
    ),
    (
        f"spark-submit --conf spark.hadoop.fs.s3a.secret.key={SECRET} app.py",
        f"spark-submit --conf spark.hadoop.fs.s3a.secret.key={MARKER} app.py",
    ),
]
KEPT_STRINGS = [
    "jdbc:oracle:thin:@db:1521/ORCL",
    "jdbc:postgresql://db:5432/sales?user=etl&ssl=true",
    "postgres://db.prod:5432",
    "s3a://warehouse",
    "hive://hive-metastore:9083",
    "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "alice@example.com",
    "https://example.com/users/@alice",
    "trino://trino-coordinator:8443",
]
# properties keyed by a secret's name: masked whatever their text
SECRET_KEYS = [
    "spark.hadoop.fs.s3a.secret.key",
    "fs.s3a.secret.key",
    "spark.hadoop.fs.s3a.bucket.sales.secret.key",
    "fs.s3a.session.token",
    "spark.hadoop.fs.azure.account.key.sales.dfs.core.windows.net",
    "spark.hadoop.fs.gs.auth.service.account.private.key",
    "spark.hadoop.javax.jdo.option.ConnectionPassword",
    "spark.ssl.keyStorePassword",
    "spark.authenticate.secret",
    "sasl.jaas.config",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "PGPASSWORD",
    "DB_PASSWD",
    "password",
    "Authorization",
    "x-api-key",
    "apiKey",
    "client_secret",
    "credentials",
    "privateKey",
    "spark.openlineage.transport.auth.apiKey",
    "refresh_token",
]
KEPT_KEYS = [
    "spark.hadoop.fs.s3a.access.key",
    "fs.s3a.access.key",
    "AWS_ACCESS_KEY_ID",
    "spark.master",
    "spark.app.name",
    "max_tokens",
    "tokenizer",
    "token_count",
    "primary.key",
    "partition_key",
    "keystore.type",
]


@pytest.mark.parametrize(("sent", "stored"), STRINGS)
def test_a_password_in_a_string_is_masked_and_the_rest_kept(sent: str, stored: str) -> None:
    event = {"run": {"facets": {"x": {"url": sent}}}}
    assert may_hold_secrets(json.dumps(event).encode())
    assert redact(event) == ["/run/facets/x/url"]
    assert event["run"]["facets"]["x"]["url"] == stored


@pytest.mark.parametrize("kept", KEPT_STRINGS)
def test_a_string_without_a_secret_is_kept(kept: str) -> None:
    event = {"run": {"facets": {"x": {"url": kept}}}}
    assert redact(event) == []
    assert event == {"run": {"facets": {"x": {"url": kept}}}}


def test_keys_that_name_a_secret_are_masked_and_others_kept() -> None:
    properties = {key: SECRET for key in SECRET_KEYS + KEPT_KEYS}
    properties["sasl.jaas.config"] = (
        f'org.apache.kafka.common.security.plain.PlainLoginModule required username="etl" '
        f'password="{SECRET}";'
    )
    properties["Authorization"] = f"Bearer {SECRET}"
    event = {"run": {"facets": {"spark_properties": {"properties": properties}}}}
    assert may_hold_secrets(json.dumps(event).encode())
    masked = redact(event)
    assert masked == [f"/run/facets/spark_properties/properties/{k}" for k in SECRET_KEYS]
    assert {k for k, v in properties.items() if v == MARKER} == set(SECRET_KEYS)
    assert {k for k, v in properties.items() if v == SECRET} == set(KEPT_KEYS)


def test_column_names_counts_and_empty_values_are_not_secrets() -> None:
    """A column called `password` keys `columnLineage` and names a schema field; numbers
    under secret-like keys are counts; an empty password hides nothing."""
    dataset = {
        "namespace": "postgres://db:5432",
        "name": "users",
        "facets": {
            "schema": {"fields": [{"name": "password", "type": "varchar"}]},
            "columnLineage": {
                "fields": {"password": {"inputFields": [{"field": "password", "name": "u"}]}}
            },
            "stats": {"token": 12, "password": ""},
        },
    }
    event = {"run": {"facets": {}}, "outputs": [dataset]}
    before = json.loads(json.dumps(event))
    assert redact(event) == []
    assert event == before


def test_masking_twice_changes_nothing_more() -> None:
    event = {"run": {"facets": {"p": {"password": SECRET, "url": STRINGS[0][0]}}}}
    assert redact(event) == ["/run/facets/p/password", "/run/facets/p/url"]
    once = json.loads(json.dumps(event))
    assert redact(event) == []
    assert event == once


def test_the_redaction_facet_sits_where_the_events_kind_keeps_facets() -> None:
    pointer_key = "spark.hadoop.fs.s3a.secret.key"
    run = {"run": {"runId": "x"}, "job": {"facets": {"p": {pointer_key: SECRET}}}}
    redact(run)
    assert run["run"]["facets"][FACET]["paths"] == [f"/job/facets/p/{pointer_key}"]
    job = {"job": {"namespace": f"mysql://etl:{SECRET}@db", "name": "j"}}
    redact(job)
    assert job["job"]["facets"][FACET]["paths"] == ["/job/namespace"]
    dataset = {"dataset": {"namespace": "s3", "name": "d", "facets": {"e": {"token": SECRET}}}}
    redact(dataset)
    assert dataset["dataset"]["facets"][FACET]["paths"] == ["/dataset/facets/e/token"]
    assert set(dataset["dataset"]["facets"][FACET]) == {"_producer", "_schemaURL", "paths"}


def test_real_producers_events_hold_nothing_to_mask() -> None:
    """The conformance corpus (Spark, Airflow, Dataproc) takes the fast path."""
    files = [*sorted(CONFORMANCE.glob("scenarios/*/*.json")), *conformance_files("valid")]
    assert len(files) > 80
    assert not [f.name for f in files if may_hold_secrets(f.read_bytes())]


def _spark_event(secret: str, run_id: str) -> dict[str, Any]:
    properties = {
        "spark.master": "k8s://https://kubernetes.default.svc:443",
        "spark.app.name": "orders_daily",
        "spark.hadoop.fs.s3a.access.key": "AKIAIOSFODNN7EXAMPLE",
        "spark.hadoop.fs.s3a.secret.key": secret,
        "spark.sql.catalog.pg.url": f"jdbc:postgresql://db:5432/sales?user=etl&password={secret}",
    }
    return run_event(
        "COMPLETE",
        "2026-12-01T10:00:00Z",
        SPARK,
        ("spark", "orders_daily"),
        run_id,
        [{"namespace": f"postgres://etl:{secret}@db:5432", "name": "sales.public.orders"}],
        [{"namespace": "s3a://warehouse", "name": "sales.db/orders_daily"}],
        {
            "spark_properties": {
                "_producer": SPARK,
                "_schemaURL": PROPERTIES,
                **{"properties": properties},
            }
        },
    )


def test_the_digest_is_of_the_event_as_stored() -> None:
    """A retry is one event; so are two sends that differ only in the secret (they are
    stored the same), and an event without a secret is stored byte for byte as sent."""
    run_id = str(uuid.uuid4())
    first = parse_event(json.dumps(_spark_event(SECRET, run_id)).encode())
    rotated = parse_event(json.dumps(_spark_event("another-one", run_id), indent=1).encode())
    assert first.digest == rotated.digest and first.event_json == rotated.event_json
    assert SECRET.encode() not in first.event_json
    clean = (conformance_files("scenarios/CLL")[0]).read_bytes()
    assert parse_event(clean).event_json is clean


@pytest.fixture(scope="module")
def service(
    pg_server: Server, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, httpx.Client]]:
    log_dir = tmp_path_factory.mktemp("redact")
    with serving(pg_server, template_db, log_dir, "redact") as (url, _, client):
        yield url, client


def test_no_secret_reaches_the_log_the_export_or_the_api(
    service: tuple[str, httpx.Client],
) -> None:
    url, client = service
    run_id = str(uuid.uuid4())
    event = _spark_event(SECRET, run_id)
    for _ in range(2):  # the same event twice is stored once
        posted = client.post("/ingest/openlineage", json=event)
        assert posted.status_code == 200, posted.text
    rotated = client.post("/api/v1/lineage", json=_spark_event("rotated-password", run_id))
    assert rotated.status_code == 200, rotated.text
    clean = conformance_files("scenarios/CLL")[0].read_bytes()
    assert client.post("/ingest/openlineage", content=clean).status_code == 200
    job_event = {
        "eventTime": "2026-12-01T11:00:00Z",
        "producer": SPARK,
        "job": {"namespace": f"mysql://etl:{SECRET}@db:3306", "name": f"load?pwd={SECRET}"},
    }
    batch = client.post("/ingest/openlineage/batch", json=[job_event])
    assert batch.status_code == 200 and batch.json()["status"] == "success", batch.text

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT event::text, job_namespace FROM event_log WHERE run_id = %s", (run_id,)
        ).fetchall()
        (stored_clean,) = conn.execute(
            "SELECT event::text FROM event_log WHERE run_id = %s",
            (json.loads(clean)["run"]["runId"],),
        ).fetchone() or ("",)
        job_rows = conn.execute(
            "SELECT job_namespace, job_name, event::text FROM event_log WHERE kind = 'job'"
        ).fetchall()
    assert len(rows) == 1, rows
    ((job_namespace, job_name, job_text),) = job_rows
    assert (job_namespace, job_name) == (f"mysql://etl:{MARKER}@db:3306", f"load?pwd={MARKER}")
    assert SECRET not in job_text
    assert json.loads(job_text)["job"]["facets"][FACET]["paths"] == ["/job/namespace", "/job/name"]
    stored = json.loads(rows[0][0])
    assert SECRET not in rows[0][0] and "rotated-password" not in rows[0][0]
    properties = stored["run"]["facets"]["spark_properties"]["properties"]
    assert properties["spark.hadoop.fs.s3a.secret.key"] == MARKER
    assert properties["spark.hadoop.fs.s3a.access.key"] == "AKIAIOSFODNN7EXAMPLE"
    assert stored["inputs"][0]["namespace"] == f"postgres://etl:{MARKER}@db:5432"
    assert stored["run"]["facets"][FACET]["paths"] == [
        "/run/facets/spark_properties/properties/spark.hadoop.fs.s3a.secret.key",
        "/run/facets/spark_properties/properties/spark.sql.catalog.pg.url",
        "/inputs/0/namespace",
    ]
    assert stored_clean == clean.decode()  # nothing to mask: stored as sent

    export = client.get("/export/openlineage/events", params={"limit": 1000})
    assert export.status_code == 200, export.text
    assert SECRET not in export.text and MARKER in export.text and FACET in export.text

    wait_until_folded(client)
    run = client.get(f"/api/v1/runs/{run_id}")
    assert run.status_code == 200, run.text
    facets = run.json()["facets"]
    assert facets[FACET]["paths"][0].endswith("spark.hadoop.fs.s3a.secret.key")
    assert facets["spark_properties"]["properties"]["spark.hadoop.fs.s3a.secret.key"] == MARKER
    datasets = client.get(
        "/api/v1/datasets", params={"namespace": stored["inputs"][0]["namespace"]}
    )
    assert [d["name"] for d in datasets.json()["items"]] == ["sales.public.orders"]
    for path in ("/api/v1/namespaces", "/api/v1/datasets", f"/api/v1/runs/{run_id}/events"):
        answer = client.get(path)
        assert answer.status_code == 200 and SECRET not in answer.text, (path, answer.text)


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_the_fast_check_lets_every_secret_named_key_through(key: str) -> None:
    """An event whose only secret is one key is looked at, whatever else it holds."""
    event = {"run": {"facets": {"p": {key: "x"}}}}
    assert may_hold_secrets(json.dumps(event).encode())
    assert redact(event) == [f"/run/facets/p/{key}"]


def test_a_masked_event_keeps_everything_else() -> None:
    """Re-encoded after masking: the keys in the order sent, numbers of the same value."""
    event = _spark_event(SECRET, str(uuid.uuid4()))
    event["run"]["facets"]["metrics"] = {"ratio": 1.50, "rows": 100.0, "big": 12345678901234567890}
    stored = parse_event(json.dumps(event).encode()).event_json
    kept = json.loads(stored)
    assert list(kept) == list(event)
    assert kept["run"]["facets"]["metrics"] == event["run"]["facets"]["metrics"]
    assert kept["outputs"] == event["outputs"]
    kept["run"]["facets"].pop(FACET)
    kept_properties = kept["run"]["facets"]["spark_properties"]["properties"]
    sent_properties = event["run"]["facets"]["spark_properties"]["properties"]
    assert {k for k in sent_properties if kept_properties[k] != sent_properties[k]} == {
        "spark.hadoop.fs.s3a.secret.key",
        "spark.sql.catalog.pg.url",
    }


def _with_secrets(folder: str, file: str) -> tuple[dict[str, Any], list[str]]:
    """A real producer's event with credentials where that producer puts configuration."""
    event = json.loads((CONFORMANCE / "scenarios" / folder / file).read_bytes())
    facets = event["run"]["facets"]
    if "spark_properties" in facets:
        facets["spark_properties"]["properties"]["spark.hadoop.fs.s3a.secret.key"] = SECRET
        return event, ["/run/facets/spark_properties/properties/spark.hadoop.fs.s3a.secret.key"]
    task = facets["airflow"]["task"]
    task["sql_conn_uri"] = f"postgresql://airflow:{SECRET}@postgres:5432/airflow"
    task["executor_config"] = {"env": {"AWS_SECRET_ACCESS_KEY": SECRET}}
    return event, [  # in the event's order: executor_config was there before
        "/run/facets/airflow/task/executor_config/env/AWS_SECRET_ACCESS_KEY",
        "/run/facets/airflow/task/sql_conn_uri",
    ]


@pytest.mark.parametrize(
    ("folder", "file"),
    [("spark_dataproc_simple_producer_test_complete", "3.json"), ("airflow", "line_02.json")],
)
def test_real_producers_events_with_a_secret_lose_only_the_secret(folder: str, file: str) -> None:
    event, paths = _with_secrets(folder, file)
    stored = json.loads(parse_event(json.dumps(event).encode()).event_json)
    assert SECRET not in json.dumps(stored)
    assert stored["run"]["facets"].pop(FACET)["paths"] == paths
    unmasked = json.loads(json.dumps(stored).replace(MARKER, SECRET))
    assert unmasked == event


def test_a_secret_nested_as_deep_as_the_decoder_goes_is_masked() -> None:
    """The deepest event the envelope accepts was a RecursionError (a 500) in the walk."""
    for depth in range(1000, 800, -2):
        event = _spark_event("x", str(uuid.uuid4()))
        event["run"]["facets"]["deep"] = "DEEP"
        deep = '{"a":' * depth + f'{{"token":"{SECRET}"}}' + "}" * depth
        try:
            stored = parse_event(json.dumps(event).replace('"DEEP"', deep).encode()).event_json
        except EnvelopeError as exc:  # too deep for the decoder: a 400, never a 500
            assert exc.status == 400, exc.detail
            continue
        assert SECRET.encode() not in stored
        assert ('"/run/facets/deep' + "/a" * depth + '/token"').encode() in stored
        return
    pytest.fail("no depth accepted")
