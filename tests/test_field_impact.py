"""Impact down to the column (issue 45 item 3), through the real processes (`metastore api`
and `metastore projector` with a policy file): a generated history of a lake, posted over
HTTP, folded, and read back.

The history: a loader writes raw.orders (v1), then three jobs derive from it field by
field: stage_orders (staging.orders: amount, id, currency), revenue (mart.revenue: total
from staging.amount, orders from staging.id; its second run adds avg from staging.amount
and FAILs), report (report.daily: total_fmt from mart.revenue.total, after the as-of
moment), and another team's audit job (namespace `secret`: audit.amounts.amount from
staging.amount), hidden from the analyst. Then the loader writes raw.orders v2: `amount`
removed, `id` int -> bigint, `qty` int -> smallint, `note` string -> int, `region` added.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from metastore.api import limits
from tests.pg_wire import round_trips
from tests.support import (
    access_env,
    bearer_clients,
    open_service,
    ownership_facet,
    run_event,
    running,
    schema_facet,
    server_log,
    serving,
    statements_logged,
    wait_until_folded,
)

PRODUCER = "https://github.com/stackabletech/metastore/tests/field-impact"
LAKE, SECRET = "s3://lake", "s3://secret"
T0 = dt.datetime(2026, 10, 1, 6, tzinfo=dt.UTC)
AS_OF = T0 + dt.timedelta(hours=2, minutes=30)  # after revenue's first run, before its second
V1 = [
    ("id", "int"),
    ("amount", "bigint"),
    ("currency", "string"),
    ("note", "string"),
    ("qty", "int"),
]
V2 = [
    ("id", "bigint"),
    ("currency", "string"),
    ("note", "int"),
    ("qty", "smallint"),
    ("region", "string"),
]
POLICY = {
    "admins": ["group:platform"],
    "read": [{"subjects": ["group:analysts"], "namespaces": ["lake", LAKE]}],
    "export": ["admin"],
}
USERS = {"analyst": ["analysts"], "admin": ["platform"]}


def _time(hours: float) -> str:
    return (T0 + dt.timedelta(hours=hours)).isoformat().replace("+00:00", "Z")


def _run_id(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/field-impact/{label}"))


def _lineage(fields: dict[str, tuple[str, str, str]]) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/"
        "ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
        "fields": {
            out: {"inputFields": [{"namespace": ns, "name": name, "field": field}]}
            for out, (ns, name, field) in fields.items()
        },
    }


def _dataset(namespace: str, name: str, **facets: Any) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "facets": facets}


def _run(
    job: tuple[str, str], label: str, hours: float, inputs: list[Any], outputs: list[Any], end: str
) -> list[dict[str, Any]]:
    run = _run_id(label)
    return [
        run_event("START", _time(hours), PRODUCER, job, run, inputs, []),
        run_event(end, _time(hours + 0.1), PRODUCER, job, run, inputs, outputs),
    ]


def history() -> list[dict[str, Any]]:
    raw, staging = (LAKE, "raw.orders"), (LAKE, "staging.orders")
    revenue = (LAKE, "mart.revenue")
    read_raw, read_staging = _dataset(*raw), _dataset(*staging)
    stage = _dataset(
        *staging,
        ownership=ownership_facet(PRODUCER, "team:staging"),
        columnLineage=_lineage({f: (*raw, f) for f in ("amount", "id", "currency")}),
    )
    total = {"total": (*staging, "amount"), "orders": (*staging, "id")}
    mart_v1 = _dataset(
        *revenue, ownership=ownership_facet(PRODUCER, "team:finance"), columnLineage=_lineage(total)
    )
    mart_v2 = _dataset(*revenue, columnLineage=_lineage({**total, "avg": (*staging, "amount")}))
    report_lineage = _lineage({"total_fmt": (*revenue, "total")})
    report = _dataset(LAKE, "report.daily", columnLineage=report_lineage)
    audit_lineage = _lineage({"amount": (*staging, "amount")})
    audit = _dataset(SECRET, "audit.amounts", columnLineage=audit_lineage)
    return [
        *_run(
            ("lake", "load_orders"),
            "load-1",
            0,
            [],
            [_dataset(*raw, schema=schema_facet(PRODUCER, V1))],
            "COMPLETE",
        ),
        *_run(("lake", "stage_orders"), "stage-1", 1, [read_raw], [stage], "COMPLETE"),
        *_run(("lake", "revenue"), "revenue-1", 2, [read_staging], [mart_v1], "COMPLETE"),
        *_run(("secret", "audit"), "audit-1", 2, [read_staging], [audit], "COMPLETE"),
        *_run(("lake", "revenue"), "revenue-2", 3, [read_staging], [mart_v2], "FAIL"),
        *_run(("lake", "report"), "report-1", 4, [_dataset(*revenue)], [report], "COMPLETE"),
        *_run(
            ("lake", "load_orders"),
            "load-2",
            5,
            [],
            [_dataset(*raw, schema=schema_facet(PRODUCER, V2))],
            "COMPLETE",
        ),
    ]


CHAIN_FIELDS, CHAIN_HOPS = 400, 8


def chain() -> list[dict[str, Any]]:
    """Issue 46's column lineage of 400 columns over 8 hops: chain.c1 .. c8, each field
    derived from the same field of the one before."""
    fields = [f"f_{i:03d}" for i in range(CHAIN_FIELDS)]
    events = []
    for hop in range(1, CHAIN_HOPS + 1):
        source = (LAKE, f"chain.c{hop - 1}")
        target = _dataset(
            LAKE, f"chain.c{hop}", columnLineage=_lineage({f: (*source, f) for f in fields})
        )
        job = ("lake", f"chain_{hop}")
        events += _run(job, f"chain-{hop}", 6 + hop, [_dataset(*source)], [target], "COMPLETE")
    return events


@pytest.fixture(scope="module")
def users(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    log_dir = tmp_path_factory.mktemp("field-impact")
    env = access_env(log_dir, POLICY, USERS, ["ingest", "read"], "t-")
    with open_service(pg_server, template_db, log_dir, "fieldimpact", env) as (api, _):
        clients = bearer_clients(api.base_url + "/api/v1", USERS, "t-")
        admin = clients["admin"]
        answer = admin.post("/lineage/batch", json=history() + chain())
        assert answer.status_code == 200, answer.text
        wait_until_folded(httpx.Client(base_url=api.base_url, headers=admin.headers))
        yield clients
        for client in clients.values():
            client.close()


def _id(client: httpx.Client, namespace: str, name: str) -> str:
    answer = client.get("/datasets", params={"namespace": namespace, "name": name})
    assert answer.status_code == 200, answer.text
    (found,) = answer.json()["items"]
    return str(found["id"])


def _impact(client: httpx.Client, *fields: tuple[str, str], **params: Any) -> Any:
    node = ",".join(f"field:{d}:{f}" for d, f in fields)
    answer = client.get("/impact", params={"node": node, **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _reached(impact: Any) -> dict[tuple[str, str], int]:
    """Each dependent field (dataset name, field) with its hops from a field asked."""
    return {(e["to"]["name"], e["to"]["field"]): e["depth"] for e in impact["columns"]}


def test_a_removed_fields_impact_reaches_the_dependent_columns_two_hops_down_and_beyond(
    users: dict[str, httpx.Client],
) -> None:
    admin = users["admin"]
    raw = _id(admin, LAKE, "raw.orders")
    fields = {f["name"] for f in admin.get(f"/datasets/{raw}").json()["fields"]}
    assert "amount" not in fields  # (removed by v2: its column lineage is still there)
    impact = _impact(admin, (raw, "amount"))
    assert _reached(impact) == {
        ("staging.orders", "amount"): 1,
        ("mart.revenue", "total"): 2,
        ("mart.revenue", "avg"): 2,
        ("audit.amounts", "amount"): 2,
        ("report.daily", "total_fmt"): 3,
    }
    assert impact["truncated"] is False and impact["edges"] == []
    nodes = {n["name"]: n for n in impact["nodes"]}
    assert {n: x["depth"] for n, x in nodes.items()} == {
        "raw.orders": 0,
        "staging.orders": 1,
        "mart.revenue": 2,
        "audit.amounts": 2,
        "report.daily": 3,
    }
    assert [o["name"] for o in nodes["staging.orders"]["owners"]] == ["team:staging"]
    assert nodes["staging.orders"]["freshness"]["last_write"] is not None
    by_job = {(e["to"]["name"], e["to"]["field"]): e["job"]["name"] for e in impact["columns"]}
    assert by_job[("report.daily", "total_fmt")] == "report"


def test_several_fields_in_one_call(users: dict[str, httpx.Client]) -> None:
    admin = users["admin"]
    raw = _id(admin, LAKE, "raw.orders")
    both = _reached(_impact(admin, (raw, "id"), (raw, "currency")))
    assert both == {
        ("staging.orders", "id"): 1,
        ("staging.orders", "currency"): 1,
        ("mart.revenue", "orders"): 2,
    }
    staging = _id(admin, LAKE, "staging.orders")
    across = _reached(_impact(admin, (raw, "currency"), (staging, "id")))
    assert across == {("staging.orders", "currency"): 1, ("mart.revenue", "orders"): 1}


def test_a_failed_runs_outputs_are_attempted_not_written(users: dict[str, httpx.Client]) -> None:
    """revenue's latest run FAILed: its job keeps its field edges (avg is reached, as its
    dataset edges stay in the graph), and mart.revenue shows the failed attempt after its
    last successful write, by the first run."""
    admin = users["admin"]
    raw = _id(admin, LAKE, "raw.orders")
    impact = _impact(admin, (raw, "amount"))
    assert ("mart.revenue", "avg") in _reached(impact)
    (mart,) = [n for n in impact["nodes"] if n["name"] == "mart.revenue"]
    fresh = mart["freshness"]
    assert fresh["last_write"]["run"]["id"] == _run_id("revenue-1")
    assert fresh["failed_attempt"]["run"]["id"] == _run_id("revenue-2")
    assert fresh["stale"] is True


def test_as_of_before_the_change_and_now(users: dict[str, httpx.Client]) -> None:
    admin = users["admin"]
    raw = _id(admin, LAKE, "raw.orders")
    then = _impact(admin, (raw, "amount"), as_of=AS_OF.isoformat())
    assert _reached(then) == {
        ("staging.orders", "amount"): 1,
        ("mart.revenue", "total"): 2,
        ("audit.amounts", "amount"): 2,
    }
    (mart,) = [n for n in then["nodes"] if n["name"] == "mart.revenue"]
    assert mart["freshness"]["failed_attempt"] is None  # (the failed run came later)
    assert ("report.daily", "total_fmt") in _reached(_impact(admin, (raw, "amount")))


def test_a_hidden_namespace_is_cut(users: dict[str, httpx.Client]) -> None:
    analyst = users["analyst"]
    raw = _id(analyst, LAKE, "raw.orders")
    impact = _impact(analyst, (raw, "amount"))
    assert ("audit.amounts", "amount") not in _reached(impact)
    assert "audit.amounts" not in {n["name"] for n in impact["nodes"]}
    assert not any(SECRET in json.dumps(e) for e in impact["columns"])
    assert ("report.daily", "total_fmt") in _reached(impact)
    audit = _id(users["admin"], SECRET, "audit.amounts")
    hidden = analyst.get("/impact", params={"node": f"field:{audit}:amount"})
    assert hidden.status_code == 404, hidden.text


def test_max_nodes_bounds_the_fields_kept(users: dict[str, httpx.Client]) -> None:
    admin = users["admin"]
    raw = _id(admin, LAKE, "raw.orders")
    impact = _impact(admin, (raw, "amount"), max_nodes=2)
    assert impact["truncated"] is True
    assert len(_reached(impact)) == 2
    assert ("staging.orders", "amount") in _reached(impact)


def test_unknown_and_malformed_nodes_are_problems_naming_them(
    users: dict[str, httpx.Client],
) -> None:
    admin = users["admin"]
    raw = _id(admin, LAKE, "raw.orders")
    nobody = str(uuid.uuid4())
    unknown = admin.get("/impact", params={"node": f"field:{nobody}:amount"})
    assert unknown.status_code == 404 and nobody in unknown.json()["detail"]
    no_field = admin.get("/impact", params={"node": f"field:{raw}:no_such_field"})
    assert no_field.status_code == 404 and "no_such_field" in no_field.json()["detail"]
    for bad in ("field:not-a-uuid:amount", f"field:{raw}:", f"field:{raw}"):
        answer = admin.get("/impact", params={"node": bad})
        assert answer.status_code == 400, (bad, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert [p["name"] for p in answer.json()["invalid-params"]] == ["node"]


def test_the_diff_marks_breaking_changes_and_the_columns_they_reach(
    users: dict[str, httpx.Client],
) -> None:
    """raw.orders v1 -> v2: `amount` removed, `qty` int -> smallint (narrowed), `note`
    string -> int (changed) break readers; `id` int -> bigint (widened) and `region`
    (added) do not. Each breaking change lists the fields downstream it reaches."""
    admin = users["admin"]
    raw = _id(admin, LAKE, "raw.orders")
    answer = admin.get(
        "/lineage/diff",
        params={"node": f"dataset:{raw}", "from": _time(0.5), "direction": "downstream"},
    )
    assert answer.status_code == 200, answer.text
    (change,) = [c for c in answer.json()["schema_changes"] if c["dataset"]["id"] == raw]
    breaking = {b["field"]: b for b in change["breaking"]}
    assert {f: b["change"] for f, b in breaking.items()} == {
        "amount": "removed",
        "qty": "narrowed",
        "note": "type_changed",
    }
    assert {(t["name"], t["breaking"]) for t in change["type_changed"]} == {
        ("id", False),
        ("qty", True),
        ("note", True),
    }
    assert [f["name"] for f in change["added"]] == ["region"]
    reaches = {(r["name"], r["field"]): r["depth"] for r in breaking["amount"]["reaches"]}
    assert reaches == {
        ("staging.orders", "amount"): 1,
        ("mart.revenue", "total"): 2,
        ("mart.revenue", "avg"): 2,
        ("audit.amounts", "amount"): 2,
        ("report.daily", "total_fmt"): 3,
    }
    assert breaking["note"]["reaches"] == [] and breaking["qty"]["reaches"] == []
    # the analyst's diff reaches only what it may read
    seen = users["analyst"].get(
        "/lineage/diff",
        params={"node": f"dataset:{raw}", "from": _time(0.5), "direction": "downstream"},
    )
    (mine,) = [c for c in seen.json()["schema_changes"] if c["dataset"]["id"] == raw]
    (amount,) = [b for b in mine["breaking"] if b["field"] == "amount"]
    assert ("audit.amounts", "amount") not in {(r["name"], r["field"]) for r in amount["reaches"]}


def test_400_columns_over_8_hops_stay_within_max_nodes_and_the_answer_cap(
    users: dict[str, httpx.Client],
) -> None:
    """Issue 46: the column lineage of chain.c8 upstream over 8 hops is 3,200 field edges
    (3.3 MB, 1.1-2.1 s); the walk now keeps `max_nodes` fields and says it stopped short."""
    admin = users["admin"]
    last = _id(admin, LAKE, f"chain.c{CHAIN_HOPS}")
    for max_nodes in (limits.NODE_LIMIT, 50):
        answer = admin.get(
            f"/datasets/{last}/column-lineage",
            params={"depth": CHAIN_HOPS, "max_nodes": max_nodes},
        )
        assert answer.status_code == 200, answer.text
        lineage = answer.json()
        assert lineage["truncated"] is True
        assert len(lineage["edges"]) == max_nodes  # (a field each)
        assert len(answer.content) < limits.MAX_ANSWER_BYTES
        assert lineage["edges"][0]["depth"] == 1
    whole = admin.get(f"/datasets/{last}/column-lineage", params={"depth": 2})
    assert whole.json()["truncated"] is False and len(whole.json()["edges"]) == 800
    first = _id(admin, LAKE, "chain.c0")
    hundred = [(first, f"f_{i:03d}") for i in range(100)]
    impact = _impact(admin, *hundred, depth=CHAIN_HOPS)
    assert impact["truncated"] is False and len(_reached(impact)) == 800
    assert {n["depth"] for n in impact["nodes"]} == set(range(CHAIN_HOPS + 1))
    cut = _impact(admin, *hundred, depth=CHAIN_HOPS, max_nodes=300)
    assert cut["truncated"] is True and len(_reached(cut)) == 300
    too_many = admin.get(
        "/impact", params={"node": ",".join(f"field:{first}:f_{i:03d}" for i in range(101))}
    )
    assert too_many.status_code == 400 and "at most 100" in too_many.text


@contextmanager
def _chain_served(
    pg_server: Any, template_db: str, tmp_path: Path, name: str
) -> Iterator[tuple[str, str]]:
    """The chain folded in a database of its own: its URL and chain.c0's id."""
    with serving(pg_server, template_db, tmp_path, name) as (url, _, client):
        answer = client.post("/api/v1/lineage/batch", json=chain())
        assert answer.status_code == 200, answer.text
        wait_until_folded(client)
        first = client.get(
            "/api/v1/datasets", params={"namespace": LAKE, "name": "chain.c0"}
        ).json()["items"][0]["id"]
        yield url, first


def test_each_further_level_of_a_column_walk_costs_two_round_trips(
    pg_server: Any, template_db: str, tmp_path: Path
) -> None:
    """One field followed down the 8-hop chain, now and as of its end: each level past the
    first costs the walk its report statement and the far datasets' (with the names the
    next level looks up), not five round trips (a SET around each level, a statement for
    the datasets and one for their names): on a loaded server each is a wake-up of both
    processes."""
    log_file = server_log(pg_server)
    with (
        _chain_served(pg_server, template_db, tmp_path, "walktrips") as (url, first),
        statements_logged(url, log_file) as statements,
        running("api", url, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
    ):
        path = f"{api.base_url}/api/v1/datasets/{first}/column-lineage"
        sent = {}
        for as_of in ({}, {"as_of": "2030-01-01T00:00:00Z"}):
            for depth in (1, CHAIN_HOPS):
                params = {"direction": "downstream", "field": "f_000", "depth": depth}
                httpx.get(path, params=params | as_of, timeout=30)  # (warm: pool, versions)
                statements()
                answer = httpx.get(path, params=params | as_of, timeout=30)
                assert answer.status_code == 200, answer.text
                assert len(answer.json()["edges"]) == depth  # (f_000 of each hop)
                sent[depth] = statements()
            # (+ 1: the api reads the read models' versions again at most once a second)
            assert sent[CHAIN_HOPS] - sent[1] <= 2 * (CHAIN_HOPS - 1) + 1, (as_of, sent)


def test_a_column_walk_waits_on_the_server_once_a_level_and_once_for_its_answer(
    pg_server: Any, template_db: str, tmp_path: Path
) -> None:
    """Round trips counted on the wire (tests/pg_wire.py): a field impact and a column
    lineage one hop down the chain wait on PostgreSQL for the dataset, the first level's
    names with the walk's planner setting, the level, the answer's names and jobs with the
    setting undone (for impact, then the datasets' details), besides the request's own
    (its transaction, the ETag's position). The two settings and the jobs each waited on
    their own before, and the last level's far datasets were read though no level
    followed: four wake-ups of both processes more a request."""
    with (
        _chain_served(pg_server, template_db, tmp_path, "walkwaits") as (url, first),
        round_trips(url) as relay,
        running("api", relay.url(), tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
    ):
        reads = {
            "column lineage": (
                f"{api.base_url}/api/v1/datasets/{first}/column-lineage",
                {"direction": "downstream", "field": "f_000", "depth": 1},
            ),
            "field impact": (
                f"{api.base_url}/api/v1/impact",
                {"node": f"field:{first}:f_000", "depth": 1},
            ),
        }
        waits: dict[str, int] = {}
        for read, (path, params) in reads.items():
            httpx.get(path, params=params, timeout=30)  # (warm: pool, versions)
            for _ in range(3):  # (the fewest: the api rereads versions once a second)
                relay.take()
                answer = httpx.get(path, params=params, timeout=30)
                assert answer.status_code == 200, answer.text
                assert len(answer.json()["edges" if "lineage" in read else "columns"]) == 1
                waits[read] = min(waits.get(read, 99), relay.take())
    assert waits["column lineage"] <= 9 and waits["field impact"] <= 7, waits  # (13, 11)
