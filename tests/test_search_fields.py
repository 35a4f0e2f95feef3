"""GET /search matches the fields of datasets' current schemas (issue 45, item 4).

Through a real `metastore api` with METASTORE_TOKENS_FILE and METASTORE_POLICY_FILE over
folded events: sales writes three tables with schemas (one named `customer_stats`, whose
name matches `customer` itself), finance two; `orders` dropped its `region` field in its
latest schema. A dataset answers once: under its name when a name matches, else under its
best field (`matched_field`), after every name hit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from projections.runner import catch_up
from tests.apiserver import policy_clients_fixture
from tests.logdata import append
from tests.support import every_page, run_event, running, schema_facet

SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
TRINO = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/trino"
SALES_JOB = ("spark-sales", "orders_etl")
FINANCE_JOB = ("trino-finance", "ledger_load")
SALES_RUNS = ("0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9b01", "0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9b02")
FINANCE_RUN = "0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9b03"


def _dataset(
    producer: str, namespace: str, name: str, fields: list[tuple[str, str | None]]
) -> dict[str, Any]:
    facet = schema_facet(producer, [(n, "string") for n, _ in fields])
    facet["fields"] = [
        {"name": n, "type": "string", **({"description": d} if d else {})} for n, d in fields
    ]
    return {"namespace": namespace, "name": name, "facets": {"schema": facet}}


ORDERS_V1 = [("order_id", None), ("customer_id", "The buyer"), ("region", None)]
ORDERS_V2 = [("order_id", None), ("customer_id", "The buyer"), ("amount", None)]
CUSTOMERS = [("customer_id", None), ("customer_name", None)]
STATS = [("customer_id", None), ("orders", None)]
LEDGER = [("ledger_customer_ref", None), ("balance", None)]
PAYMENTS = [("iban", "Bank account of the Customer"), ("paid_at", None)]


def events() -> list[dict[str, Any]]:
    sales = [
        _dataset(SPARK, "s3a://sales", "orders", ORDERS_V1),
        _dataset(SPARK, "s3a://sales", "customers", CUSTOMERS),
        _dataset(SPARK, "s3a://sales", "customer_stats", STATS),
    ]
    finance = [
        _dataset(TRINO, "trino://finance", "lakehouse.finance.ledger", LEDGER),
        _dataset(TRINO, "trino://finance", "lakehouse.finance.payments", PAYMENTS),
    ]
    return [
        run_event("COMPLETE", "2026-09-02T10:00:00Z", SPARK, SALES_JOB, SALES_RUNS[0], [], sales),
        run_event(
            "COMPLETE",
            "2026-09-02T11:00:00Z",
            SPARK,
            SALES_JOB,
            SALES_RUNS[1],
            [],
            [_dataset(SPARK, "s3a://sales", "orders", ORDERS_V2)],
        ),
        run_event("COMPLETE", "2026-09-02T10:30:00Z", TRINO, FINANCE_JOB, FINANCE_RUN, [], finance),
    ]


POLICY = {
    "admins": ["group:platform"],
    "read": [
        {"subjects": ["group:sales"], "namespaces": ["spark-sales", "s3a://sales*"]},
        {"subjects": ["group:finance"], "namespaces": ["trino-finance", "trino://finance*"]},
    ],
}
USERS = {"alice": ["sales"], "bob": ["finance"], "root": ["platform"]}


clients = policy_clients_fixture("search_fields", events, USERS, POLICY)


def _search(client: httpx.Client, **params: Any) -> tuple[list[dict[str, Any]], set[Any]]:
    """Every hit, page by page, and the pages' (total, total_is_exact)."""
    hits, totals = every_page(client, "/search", **params)
    return hits, set(totals)


def _seen(hit: dict[str, Any]) -> tuple[str, str, str]:
    """(dataset name, what matched: `name` or the field, match)."""
    matched = hit["matched_field"]["name"] if "matched_field" in hit else "name"
    return (hit["name"], matched, hit["match"])


def test_a_field_name_finds_its_dataset_exact_prefix_and_substring(
    clients: dict[str, httpx.Client],
) -> None:
    root = clients["root"]
    hits, totals = _search(root, q="CUSTOMER_ID")
    # (two exact hits on one field name: in the order of their ids)
    assert sorted(_seen(h) for h in hits) == [
        ("customer_stats", "customer_id", "exact"),
        ("customers", "customer_id", "exact"),
        ("orders", "customer_id", "exact"),
    ]
    assert totals == {(3, True)}
    orders = next(h for h in hits if h["name"] == "orders")
    assert orders["matched_field"] == {"name": "customer_id", "description": "The buyer"}
    assert orders["namespace"] == "s3a://sales" and "matched_name" not in orders

    hits, totals = _search(root, q="tomer_i")  # a substring of a field name only
    assert {_seen(h) for h in hits} == {
        ("customer_stats", "customer_id", "substring"),
        ("customers", "customer_id", "substring"),
        ("orders", "customer_id", "substring"),
    }
    assert totals == {(3, True)}
    # a field of the current schema only: `region` left `orders`, `amount` came
    assert _search(root, q="region") == ([], {(0, True)})
    assert [_seen(h) for h in _search(root, q="amount")[0]] == [("orders", "amount", "exact")]


def test_name_hits_rank_before_field_hits_and_totals_agree_with_paging(
    clients: dict[str, httpx.Client],
) -> None:
    root = clients["root"]
    expected = [
        # a name that matches: under its name, once, whatever its fields
        ("customer_stats", "name", "prefix"),
        ("customers", "name", "prefix"),
        # then fields: prefix, then substring of a field name, then a description alone
        ("orders", "customer_id", "prefix"),
        ("lakehouse.finance.ledger", "ledger_customer_ref", "substring"),
        ("lakehouse.finance.payments", "iban", "substring"),
    ]
    for limit in (1, 2, 50):
        hits, totals = _search(root, q="customer", limit=limit)
        assert [_seen(h) for h in hits] == expected, limit
        assert totals == {(len(expected), True)}, limit
    payments = _search(root, q="customer")[0][-1]
    assert payments["matched_field"] == {
        "name": "iban",
        "description": "Bank account of the Customer",
    }
    # the filters narrow field hits as name hits
    hits, totals = _search(root, q="customer", namespace="trino://finance")
    assert [h["name"] for h in hits] == [e[0] for e in expected[3:]]
    assert totals == {(2, True)}
    assert _search(root, q="customer", type="job") == ([], {(0, True)})


def test_a_reader_finds_by_field_only_the_datasets_it_may_read(
    clients: dict[str, httpx.Client],
) -> None:
    alice_hits, alice_totals = _search(clients["alice"], q="customer")
    assert [_seen(h) for h in alice_hits] == [
        ("customer_stats", "name", "prefix"),
        ("customers", "name", "prefix"),
        ("orders", "customer_id", "prefix"),
    ]
    assert alice_totals == {(3, True)}
    bob_hits, bob_totals = _search(clients["bob"], q="customer", limit=1)
    assert [_seen(h) for h in bob_hits] == [
        ("lakehouse.finance.ledger", "ledger_customer_ref", "substring"),
        ("lakehouse.finance.payments", "iban", "substring"),
    ]
    assert bob_totals == {(2, True)}
    assert _search(clients["bob"], q="customer_id") == ([], {(0, True)})


# Batches folded one after another: a run's FAIL logged after its COMPLETE takes back the
# schema it wrote; a symlink later joins two datasets with schemas of their own.
TABLE = ("s3a://late", "events")
TABLE_RUNS = ("0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9c01", "0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9c02")
JOINED_RUN = "0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9c03"
MERGING_RUN = "0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9c04"
LATE_JOB = ("spark-late", "events_etl")


def _table(fields: list[str]) -> dict[str, Any]:
    return _dataset(SPARK, *TABLE, [(f, None) for f in fields])


BATCHES = [
    [
        run_event(
            "COMPLETE",
            "2026-09-03T10:00:00Z",
            SPARK,
            LATE_JOB,
            TABLE_RUNS[0],
            [],
            [_table(["alpha_kept"])],
        ),
        run_event(
            "COMPLETE",
            "2026-09-03T11:00:00Z",
            SPARK,
            LATE_JOB,
            TABLE_RUNS[1],
            [],
            [_table(["beta_failed"])],
        ),
        run_event(
            "COMPLETE",
            "2026-09-03T09:00:00Z",
            TRINO,
            FINANCE_JOB,
            JOINED_RUN,
            [],
            [_dataset(TRINO, "trino://hive", "lake.events", [("gamma_trino", None)])],
        ),
    ],
    # the second run's end, logged late: FAIL, so it wrote nothing
    [run_event("FAIL", "2026-09-03T11:05:00Z", SPARK, LATE_JOB, TABLE_RUNS[1], [], [])],
]


@pytest.fixture(scope="module")
def batches(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, httpx.Client]]:
    folder = tmp_path_factory.mktemp("search_fields_batches")
    env = {"METASTORE_AUTH": "disabled"}
    with pg_server.database("fields", template_db) as url:
        for batch in BATCHES:
            with psycopg.connect(url, autocommit=True) as conn:
                append(conn, batch)
            catch_up(url)
        with (
            running("api", url, folder, env=env) as api,
            httpx.Client(base_url=api.base_url + "/api/v1", timeout=30) as client,
        ):
            yield url, client


def test_a_schema_taken_back_or_merged_away_is_no_longer_found(
    batches: tuple[str, httpx.Client],
) -> None:
    url, client = batches
    assert [_seen(h) for h in _search(client, q="alpha")[0]] == [("events", "alpha_kept", "prefix")]
    assert _search(client, q="beta_failed") == ([], {(0, True)})  # the failed run's schema
    assert len(_search(client, q="gamma")[0]) == 1
    # a symlink joins the Trino table to the Spark one: one dataset, its current schema
    joined = _table(["delta_joined"])
    joined["facets"]["symlinks"] = {
        "_producer": SPARK,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
        "identifiers": [{"namespace": "trino://hive", "name": "lake.events", "type": "TABLE"}],
    }
    event = run_event(
        "COMPLETE", "2026-09-03T12:00:00Z", SPARK, LATE_JOB, MERGING_RUN, [], [joined]
    )
    with psycopg.connect(url, autocommit=True) as conn:
        append(conn, [event])
    catch_up(url)
    hits, totals = _search(client, q="delta")
    assert [_seen(h) for h in hits] == [("lake.events", "delta_joined", "prefix")]
    assert totals == {(1, True)}
    for gone in ("alpha", "gamma"):
        assert _search(client, q=gone) == ([], {(0, True)}), gone


def test_a_short_q_matches_field_names_from_their_start(
    clients: dict[str, httpx.Client],
) -> None:
    # (fewer than 3 characters: no trigram to look the fields up by, so no substring)
    hits, totals = _search(clients["root"], q="Ib")
    assert [_seen(h) for h in hits] == [("lakehouse.finance.payments", "iban", "prefix")]
    assert totals == {(1, True)}
    # `balance` from its start; `iban` contains `ba`, but a short q is no substring of fields
    hits, totals = _search(clients["root"], q="ba")
    assert [_seen(h) for h in hits] == [("lakehouse.finance.ledger", "balance", "prefix")]
    assert totals == {(1, True)}
