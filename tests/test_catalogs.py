"""One table, one dataset: the catalog map and the `catalog` facet join the names Spark,
Hive and Trino give the same table (the brief's seed scenario), replayably."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore.catalogs import CatalogMap, load_catalog_map, parse_catalog_map
from metastore.config import ConfigError, load_settings
from projections.common import dataset_id
from projections.replay import rebuild
from projections.runner import catch_up
from projections.schema import PROJECTIONS, REPLAY_LOCK
from tests.apiserver import get
from tests.logdata import append, dump_readmodel
from tests.support import conformance_events, projector_at_start, running

Conn = psycopg.Connection[Any]

TRINO_NS = (
    "trino://trino-coordinator-default-0.trino-coordinator-default.prod.svc.cluster.local:8443"
)
SPARK = ("s3a://warehouse", "sales.db/orders_daily")
HIVE = ("hive://hive-metastore:9083", "sales.orders_daily")
TRINO = (TRINO_NS, "lakehouse.sales.orders_daily")
RAW_ORDERS = ("s3a://warehouse", "raw.db/orders")
SUMMARY = (TRINO_NS, "lakehouse.sales.orders_summary")
HIVE_SUMMARY = ("hive://hive-metastore:9083", "sales.orders_summary")
TRINO_QUERY = ("prod-lineage", "20260902_101500_00042_ab3kd")
MAP = """\
# which Trino catalog is which Hive metastore
catalogs:
  - engine: "trino://trino-coordinator-*:8443"  # pods and the service alike
    catalog: lakehouse
    metastore: "thrift://hive-metastore:9083"
"""


def seed() -> list[dict[str, Any]]:
    return conformance_events("scenarios/seed_spark_trino")


def the_map(tmp_path: Path, text: str = MAP) -> CatalogMap:
    path = tmp_path / "catalogs.yaml"
    path.write_text(text)
    return load_catalog_map(str(path))


def dataset_of(conn: Conn, name: tuple[str, str]) -> Any:
    row = conn.execute(
        "SELECT dataset_id FROM readmodel.dataset_names WHERE namespace = %s AND name = %s", name
    ).fetchone()
    return row[0] if row else None


def names_of(conn: Conn, did: Any) -> dict[tuple[str, str], tuple[str, Any]]:
    rows = conn.execute(
        "SELECT namespace, name, kind, joined_by FROM readmodel.dataset_names "
        "WHERE dataset_id = %s",
        (did,),
    ).fetchall()
    return {(r[0], r[1]): (r[2], r[3]) for r in rows}


def live_datasets(conn: Conn) -> int:
    row = conn.execute("SELECT count(*) FROM readmodel.datasets WHERE merged_into IS NULL")
    return row.fetchone()[0]  # type: ignore[index]


# --- the map file -----------------------------------------------------------------------


def test_the_map_is_read_with_globs_and_thrift_uris_as_hive_namespaces(tmp_path: Path) -> None:
    catalogs = the_map(tmp_path)
    assert [(e.engine, e.catalog, e.metastore, e.line) for e in catalogs.entries] == [
        ("trino://trino-coordinator-*:8443", "lakehouse", "hive://hive-metastore:9083", 3)
    ]
    match = catalogs.match(TRINO_NS, "lakehouse.sales.orders_daily")
    assert match is not None and match.name == "sales.orders_daily" and match.index == 0
    service = "trino://trino-coordinator-default.prod.svc.cluster.local:8443"
    assert catalogs.match(service, "lakehouse.sales.x") is not None
    assert catalogs.match(TRINO_NS.replace(":8443", ":8080"), "lakehouse.sales.x") is None
    assert catalogs.match(TRINO_NS, "other.sales.orders_daily") is None
    assert catalogs.match(TRINO_NS, "lakehouse") is None
    # the fingerprint is the entries' meaning: comments and layout do not count
    same = the_map(tmp_path, MAP.replace("# which", "# what").replace("  # pods", "  #"))
    assert same.fingerprint == catalogs.fingerprint != ""
    other = the_map(tmp_path, MAP.replace("lakehouse", "warehouse"))
    assert other.fingerprint != catalogs.fingerprint
    assert the_map(tmp_path, "catalogs: []\n").fingerprint == ""


# Two entries, the second with a misspelt key; two entries for one catalog of one engine.
MISSPELT = (
    "catalogs:\n  - engine: t\n    catalog: c\n    metastore: hive://m:9083\n"
    "  - engine: t\n    catalgo: c\n    metastore: hive://m:9083\n"
)
REPEATED = (
    "catalogs:\n  - {engine: t, catalog: c, metastore: m}\n"
    "  - {engine: t, catalog: c, metastore: n}\n"
)
BAD_FILES = [
    ("catalogs:\n  - engine: [\n", 3, "not valid YAML"),
    ("- engine: x\n", 1, "expected a mapping with a `catalogs` list"),
    ("catalog:\n  - engine: x\n", 1, "unknown key 'catalog'"),
    ("catalogs:\n  engine: x\n", 2, "catalogs: expected a list"),
    (MISSPELT, 6, "catalogs[1]: unknown key 'catalgo'"),
    ("catalogs:\n  - engine: t\n    catalog: c\n", 2, "catalogs[0]: metastore missing"),
    ("catalogs:\n  - engine: t\n    catalog: 7\n    metastore: m\n", 3, "catalogs[0].catalog"),
    ("catalogs:\n  - engine: t\n    catalog: a.b\n    metastore: m\n", 2, "has no '.'"),
    (REPEATED, 3, "repeat the entry of line 2"),
    ("catalogs:\n  - engine: ''\n    catalog: c\n    metastore: m\n", 2, "non-empty string"),
]


@pytest.mark.parametrize(("text", "line", "fragment"), BAD_FILES)
def test_a_bad_map_file_is_an_error_naming_its_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = tmp_path / "catalogs.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_settings({"METASTORE_CATALOGS_FILE": str(path)})
    message = str(error.value)
    assert message.startswith(f"METASTORE_CATALOGS_FILE={str(path)!r} line {line}: "), message
    assert fragment in message and "\n" not in message


def test_a_bad_map_file_stops_the_projector_at_start_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "catalogs.yaml"
    path.write_text(MAP.replace("    catalog: lakehouse\n", "    catalog: [lakehouse]\n"))
    done = projector_at_start({"METASTORE_CATALOGS_FILE": str(path)})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"metastore: METASTORE_CATALOGS_FILE={str(path)!r} line 4: "
        "catalogs[0].catalog: expected a non-empty string"
    ]


def test_a_map_without_entries_is_no_map() -> None:
    assert not parse_catalog_map("catalogs:\n", "f").entries
    assert not load_catalog_map("").entries


# --- the datasets projection --------------------------------------------------------------


def test_the_seed_with_the_map_is_one_dataset_for_the_three_names(
    conn: Conn, tmp_path: Path
) -> None:
    append(conn, seed())
    catch_up(conn, catalogs=the_map(tmp_path))
    spark = dataset_of(conn, SPARK)
    assert spark == dataset_id(*SPARK)  # the id of the name seen first
    assert dataset_of(conn, HIVE) == spark and dataset_of(conn, TRINO) == spark
    names = names_of(conn, spark)
    # Trino's name is one an event used: `emitted`, and joined_by says the map joined it.
    assert {name: kind for name, (kind, _) in names.items()} == {
        SPARK: "emitted",
        HIVE: "symlink",
        TRINO: "emitted",
    }
    assert names[TRINO][1] == {
        "rule": "map",
        "entry": 0,
        "engine": "trino://trino-coordinator-*:8443",
        "catalog": "lakehouse",
        "metastore": "hive://hive-metastore:9083",
        "role": "engine",
        "via": {"namespace": HIVE[0], "name": HIVE[1]},
    }
    # Hive's name is a symlink Spark sent, and the map derived it too: joined_by says so
    assert names[HIVE][1]["role"] == "metastore" and names[SPARK][1] is None
    # the Trino output has its Hive name too, known from the map alone
    summary = dataset_of(conn, SUMMARY)
    assert summary == dataset_id(*SUMMARY) and dataset_of(conn, HIVE_SUMMARY) == summary
    kind, joined_by = names_of(conn, summary)[HIVE_SUMMARY]
    assert kind == "catalog" and joined_by["role"] == "metastore"
    assert joined_by["via"] == {"namespace": SUMMARY[0], "name": SUMMARY[1]}
    assert live_datasets(conn) == 3  # raw.db/orders, orders_daily, orders_summary
    # the id the Trino name had on its own answers as the joined dataset
    alias = conn.execute(
        "SELECT merged_into FROM readmodel.datasets WHERE id = %s", (dataset_id(*TRINO),)
    ).fetchone()
    assert alias == (spark,)


def test_the_seed_without_the_map_is_two_datasets_as_before(conn: Conn) -> None:
    append(conn, seed())
    catch_up(conn)
    spark = dataset_of(conn, SPARK)
    assert dataset_of(conn, HIVE) == spark
    assert dataset_of(conn, TRINO) == dataset_id(*TRINO) != spark
    assert {kind for kind, _ in names_of(conn, dataset_of(conn, TRINO)).values()} == {"emitted"}
    assert live_datasets(conn) == 4


def with_catalog_facet(events: list[dict[str, Any]], catalog: dict[str, Any]) -> Any:
    events = copy.deepcopy(events)
    for event in events:
        for dataset in event.get("inputs", []) + event.get("outputs", []):
            if dataset["namespace"].startswith("trino://"):
                dataset.setdefault("facets", {})["catalog"] = {
                    "_producer": "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/client",
                    "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/"
                    "CatalogDatasetFacet.json#/$defs/CatalogDatasetFacet",
                    **catalog,
                }
    return events


HIVE_CATALOG = {
    "name": "lakehouse",
    "type": "hive",
    "framework": "hive",
    "metadataUri": "thrift://hive-metastore:9083",
    "warehouseUri": "s3a://warehouse",
}


def test_a_catalog_facet_naming_the_metastore_joins_without_a_map(conn: Conn) -> None:
    append(conn, with_catalog_facet(seed(), HIVE_CATALOG))
    catch_up(conn)
    spark = dataset_of(conn, SPARK)
    assert dataset_of(conn, TRINO) == spark and dataset_of(conn, HIVE) == spark
    kind, joined_by = names_of(conn, spark)[TRINO]
    assert kind == "emitted"
    assert joined_by == {
        "rule": "facet",
        "entry": None,
        "engine": TRINO_NS,
        "catalog": "lakehouse",
        "metastore": "hive://hive-metastore:9083",
        "role": "engine",
        "via": {"namespace": HIVE[0], "name": HIVE[1]},
    }
    assert live_datasets(conn) == 3


@pytest.mark.parametrize(
    "catalog",
    [
        {**HIVE_CATALOG, "name": "spark_catalog"},  # the name is not in this catalog
        {**HIVE_CATALOG, "metadataUri": "jdbc:mysql://db:3306/iceberg"},  # not a Hive metastore
        {k: v for k, v in HIVE_CATALOG.items() if k != "metadataUri"},
    ],
)
def test_a_catalog_facet_that_does_not_name_the_tables_metastore_joins_nothing(
    conn: Conn, catalog: dict[str, Any]
) -> None:
    append(conn, with_catalog_facet(seed(), catalog))
    catch_up(conn)
    assert dataset_of(conn, TRINO) == dataset_id(*TRINO) != dataset_of(conn, SPARK)
    assert live_datasets(conn) == 4


def test_a_replay_gives_the_same_ids_and_tables(conn: Conn, tmp_path: Path) -> None:
    catalogs = the_map(tmp_path)
    events = seed()
    # in the log: Trino's query first, then Spark's job (the join merges two datasets)
    append(conn, events[2:])
    catch_up(conn, catalogs=catalogs)
    append(conn, events[:2])
    catch_up(conn, catalogs=catalogs)
    trino = dataset_of(conn, TRINO)
    assert trino == dataset_id(*TRINO)  # first seen: it survives the merge
    assert dataset_of(conn, SPARK) == trino and dataset_of(conn, HIVE) == trino
    incremental = dump_readmodel(conn)
    rebuild(conn.info.dsn, [p.NAME for p in PROJECTIONS], catalogs=catalogs)
    assert dump_readmodel(conn) == incremental
    assert conn.execute(
        "SELECT merged_into FROM readmodel.datasets WHERE id = %s", (dataset_id(*SPARK),)
    ).fetchone() == (trino,)


# --- the real processes: a map changed, the projector restarted -------------------------


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def datasets_state(conn: Conn) -> tuple[int, str]:
    row = conn.execute(
        "SELECT events_folded, rules FROM projection_state WHERE name = 'datasets'"
    ).fetchone()
    assert row is not None
    return row[0], row[1]


def api_lookup(api: httpx.Client, name: tuple[str, str]) -> str:
    response = api.get("/datasets", params={"namespace": name[0], "name": name[1]})
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    assert len(items) == 1, (name, items)
    return str(items[0]["id"])


def test_a_changed_map_rebuilds_on_restart_and_a_split_gives_back_the_ids(
    conn: Conn, database_url: str, tmp_path: Path
) -> None:
    total = append(conn, seed())
    path = tmp_path / "catalogs.yaml"
    env = {"METASTORE_CATALOGS_FILE": str(path)}
    with (
        running("api", database_url, tmp_path) as api_process,
        httpx.Client(base_url=api_process.base_url + "/api/v1", timeout=10) as api,
    ):
        path.write_text("catalogs: []\n")
        with running("projector", database_url, tmp_path, env=env):
            wait_for(lambda: datasets_state(conn) == (total, ""))
        before = {name: api_lookup(api, name) for name in (SPARK, HIVE, TRINO, SUMMARY)}
        assert before[SPARK] == before[HIVE] != before[TRINO]

        catalogs = the_map(tmp_path)  # writes the map file
        with running("projector", database_url, tmp_path, env=env) as projector:
            wait_for(lambda: datasets_state(conn) == (total, catalogs.fingerprint))
        assert "rebuilding" in projector.output()
        joined = {name: api_lookup(api, name) for name in (SPARK, HIVE, TRINO, SUMMARY)}
        assert joined[SPARK] == joined[HIVE] == joined[TRINO] == before[SPARK]
        assert joined[SUMMARY] == before[SUMMARY]
        # the id the Trino name had answers as the joined dataset
        answer = api.get(f"/datasets/{before[TRINO]}")
        assert answer.status_code == 200 and answer.json()["id"] == before[SPARK]

        path.write_text(MAP.replace("lakehouse", "warehouse"))  # the entry no longer matches
        changed = load_catalog_map(str(path))
        with running("projector", database_url, tmp_path, env=env):
            wait_for(lambda: datasets_state(conn) == (total, changed.fingerprint))
        split = {name: api_lookup(api, name) for name in (SPARK, HIVE, TRINO, SUMMARY)}
        assert split == before
        trino = api.get(f"/datasets/{before[TRINO]}").json()
        assert [(n["name"], n["kind"]) for n in trino["names"]] == [(TRINO[1], "emitted")]


def folded(conn: Conn, projection: str) -> int:
    row = conn.execute(
        "SELECT events_folded FROM projection_state WHERE name = %s", (projection,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_while_the_datasets_rebuild_the_api_serves_and_the_rest_is_folded(
    conn: Conn, database_url: str, tmp_path: Path
) -> None:
    events = seed()
    total = append(conn, events[:2])  # the Spark job
    catch_up(conn)
    catalogs = the_map(tmp_path)
    env = {"METASTORE_CATALOGS_FILE": str(tmp_path / "catalogs.yaml")}
    with (
        psycopg.connect(database_url, autocommit=True) as holder,
        running("api", database_url, tmp_path) as api_process,
        httpx.Client(base_url=api_process.base_url + "/api/v1", timeout=10) as api,
    ):
        # A rebuild waits for the replay lock: held here, the rebuild cannot finish.
        holder.execute("SELECT pg_advisory_lock(%s)", (REPLAY_LOCK,))
        with running("projector", database_url, tmp_path, env=env) as projector:
            wait_for(lambda: "rebuilding them while folding the others" in projector.output())
            health = httpx.get(projector.base_url + "/healthz", timeout=5).json()
            assert health["role"] == "rebuilding"
            total += append(conn, events[2:])  # the Trino query, meanwhile
            wait_for(lambda: folded(conn, "jobs") == total and folded(conn, "lineage") == total)
            # the datasets stay as they were, and are served
            assert datasets_state(conn) == (2, "")
            assert api_lookup(api, SPARK) == str(dataset_id(*SPARK))
            unknown = api.get("/datasets", params={"namespace": TRINO[0], "name": TRINO[1]})
            assert unknown.json()["items"] == []
            holder.execute("SELECT pg_advisory_unlock(%s)", (REPLAY_LOCK,))
            wait_for(lambda: datasets_state(conn) == (total, catalogs.fingerprint))
            wait_for(
                lambda: (
                    httpx.get(projector.base_url + "/healthz", timeout=5).json()["role"] == "active"
                )
            )
        assert api_lookup(api, TRINO) == api_lookup(api, SPARK) == str(dataset_id(*SPARK))


# --- the read API -----------------------------------------------------------------------

# Column lineage on both sides of the join: Spark's orders_daily.amount from raw.db/orders,
# Trino's orders_summary.total from lakehouse.sales.orders_daily.amount.


def with_column_lineage(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    events = copy.deepcopy(events)

    def lineage(namespace: str, name: str, field: str, out: str) -> dict[str, Any]:
        return {
            "_producer": "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/client",
            "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
            "fields": {
                out: {"inputFields": [{"namespace": namespace, "name": name, "field": field}]}
            },
        }

    spark_complete, trino_complete = events[1], events[3]
    spark_complete["outputs"][0]["facets"]["columnLineage"] = lineage(
        *RAW_ORDERS, "amount", "amount"
    )
    trino_complete["outputs"][0]["facets"] = {"columnLineage": lineage(*TRINO, "amount", "total")}
    return events


@pytest.fixture(scope="module")
def seed_api(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    """A real API over the seed scenario (with column lineage) folded with the map."""
    log_dir = tmp_path_factory.mktemp("catalogs")
    with pg_server.database("catalogs", template_db) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            append(conn, with_column_lineage(seed()))
        catch_up(url, catalogs=the_map(log_dir))
        with (
            running("api", url, log_dir) as api,
            httpx.Client(base_url=api.base_url + "/api/v1", timeout=10) as client,
        ):
            yield client


def test_a_lookup_by_any_of_the_three_names_gives_one_dataset_listing_them_all(
    seed_api: httpx.Client,
) -> None:
    ids = {api_lookup(seed_api, name) for name in (SPARK, HIVE, TRINO)}
    assert len(ids) == 1
    dataset = get(seed_api, f"/datasets/{ids.pop()}")
    names = {(n["namespace"], n["name"]): n for n in dataset["names"]}
    assert set(names) == {SPARK, HIVE, TRINO}
    assert names[SPARK]["kind"] == "emitted" and names[SPARK]["joined_by"] is None
    assert names[HIVE]["kind"] == "symlink" and names[HIVE]["symlink_type"] == "TABLE"
    assert names[TRINO]["kind"] == "emitted"
    assert names[TRINO]["joined_by"]["rule"] == "map"
    assert names[TRINO]["joined_by"]["entry"] == 0
    assert names[TRINO]["joined_by"]["via"] == {"namespace": HIVE[0], "name": HIVE[1]}
    assert {j["job"]["name"] for j in dataset["consumers"]} == {TRINO_QUERY[1]}
    assert {w["job"]["name"] for w in dataset["producers"]} == {
        "orders_etl.execute_replace_table_as_select_command"
    }


def test_each_dataset_counts_in_every_namespace_it_has_a_name_in(
    seed_api: httpx.Client,
) -> None:
    counts = {n["name"]: n["dataset_count"] for n in get(seed_api, "/namespaces")["items"]}
    listed = get(seed_api, "/datasets")
    assert listed["total"] == 3  # raw orders, orders_daily, summary
    # Hive's namespace lists the table Spark named there (a symlink) and the summary, whose
    # Hive name the map derived and which is shown under it
    in_hive = get(seed_api, "/datasets", namespace=HIVE[0])["items"]
    assert [(d["namespace"], d["name"]) for d in in_hive] == [HIVE, HIVE_SUMMARY]
    assert [d["matched_name"]["kind"] for d in in_hive] == ["symlink", "catalog"]
    # Trino's lists the summary by the name Trino's event emitted (shown under its metastore
    # name), and orders_daily by the name Trino read it under
    in_trino = get(seed_api, "/datasets", namespace=TRINO_NS)["items"]
    summary = next(d for d in in_trino if d["matched_name"]["name"] == SUMMARY[1])
    assert (summary["namespace"], summary["name"]) == HIVE_SUMMARY
    matched = summary["matched_name"]
    assert (matched["namespace"], matched["name"], matched["kind"]) == (*SUMMARY, "emitted")
    assert matched["joined_by"]["role"] == "engine"
    names = {
        (n["namespace"], n["name"]): n for n in get(seed_api, f"/datasets/{summary['id']}")["names"]
    }
    assert {name: n["kind"] for name, n in names.items()} == {
        SUMMARY: "emitted",
        HIVE_SUMMARY: "catalog",
    }
    assert names[HIVE_SUMMARY]["joined_by"]["role"] == "metastore"
    assert counts == {RAW_ORDERS[0]: 2, HIVE[0]: 2, TRINO_NS: 2, "prod-lineage": 0}
    assert counts[TRINO_NS] == len(in_trino) and counts[HIVE[0]] == len(in_hive)


def graph_names(graph: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(n["type"], n["namespace"], n["name"]) for n in graph["nodes"]}


def dataset_ids(graph: dict[str, Any]) -> set[str]:
    """The graph's datasets by id: a node shows its display name, which any name finds."""
    return {n["id"] for n in graph["nodes"] if n["type"] == "dataset"}


def test_lineage_downstream_of_raw_orders_reaches_the_trino_query_and_its_output(
    seed_api: httpx.Client,
) -> None:
    raw = api_lookup(seed_api, RAW_ORDERS)
    graph = get(seed_api, "/lineage", node=f"dataset:{raw}", direction="downstream", depth=5)
    assert ("job", *TRINO_QUERY) in graph_names(graph)
    assert api_lookup(seed_api, SUMMARY) in dataset_ids(graph)
    assert api_lookup(seed_api, SPARK) in dataset_ids(graph)
    assert len(graph["nodes"]) == 5 and not graph["truncated"]
    # as of a moment between the Spark job and the Trino query, the graph stops at the table
    before = get(
        seed_api,
        "/lineage",
        node=f"dataset:{raw}",
        direction="downstream",
        depth=5,
        as_of="2026-09-02T10:10:00Z",
    )
    assert api_lookup(seed_api, SPARK) in dataset_ids(before)
    assert ("job", *TRINO_QUERY) not in graph_names(before)
    after = get(
        seed_api,
        "/lineage",
        node=f"dataset:{raw}",
        direction="downstream",
        depth=5,
        as_of="2026-09-02T10:20:00Z",
    )
    assert graph_names(after) == graph_names(graph)


def test_column_lineage_follows_the_joined_identity(seed_api: httpx.Client) -> None:
    summary = api_lookup(seed_api, SUMMARY)
    answer = get(seed_api, f"/datasets/{summary}/column-lineage", depth=3)
    got = {
        (
            e["from"]["reported_as"]["namespace"],
            e["from"]["reported_as"]["name"],
            e["from"]["field"],
            e["to"]["field"],
        )
        for e in answer["edges"]
    }
    assert (*TRINO, "amount", "total") in got
    assert (*RAW_ORDERS, "amount", "amount") in got  # through the Spark side of the table
    joined = api_lookup(seed_api, SPARK)
    assert joined in {e["from"]["dataset"]["id"] for e in answer["edges"] if e["from"]["dataset"]}
    as_of = get(
        seed_api, f"/datasets/{summary}/column-lineage", depth=3, as_of="2026-09-02T10:20:00Z"
    )
    assert {json.dumps(e, sort_keys=True) for e in as_of["edges"]} == {
        json.dumps(e, sort_keys=True) for e in answer["edges"]
    }


def test_the_joined_dataset_as_of_a_time_has_the_consumers_of_then(
    seed_api: httpx.Client,
) -> None:
    joined = api_lookup(seed_api, TRINO)
    then = get(seed_api, f"/datasets/{joined}", as_of="2026-09-02T10:10:00Z")
    assert then["consumers"] == []
    later = get(seed_api, f"/datasets/{joined}", as_of="2026-09-02T10:20:00Z")
    assert {j["job"]["name"] for j in later["consumers"]} == {TRINO_QUERY[1]}
