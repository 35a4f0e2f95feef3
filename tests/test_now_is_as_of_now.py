"""One meaning of "now" (issue 48, items 2 and 11), through the real projector fold and a real
`metastore api` process over HTTP.

Every read without `as_of` equals the same read with `as_of` set to the moment it was
answered: a job's edges now are those of its latest run (and its static lineage), as they
are as of any moment. A grouped job (one name for many queries, as Superset's service
account is to Trino) whose runs write different tables shows the latest run's table, now
and as of now alike; a diff between two quiet moments is empty. The property runs over
generated logs (few, small: it runs in CI), each in namespaces of its own, against one
database and one API process.
"""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from projections.runner import catch_up
from tests.conftest import Server
from tests.logdata import append
from tests.support import RUN_EVENT, serving

PRODUCER = "https://github.com/stackabletech/metastore/tests"
JOB_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"
LINEAGE_FACET = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
SCHEMA_FACET = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def when(hours: float) -> str:
    return (BASE + dt.timedelta(hours=hours)).isoformat().replace("+00:00", "Z")


def dataset(namespace: str, name: str, lineage_from: str | None = None) -> dict[str, Any]:
    """A dataset reference with a schema (and a field edge `id` <- `lineage_from`.id)."""
    facets: dict[str, Any] = {
        "schema": {
            "_producer": PRODUCER,
            "_schemaURL": SCHEMA_FACET,
            "fields": [{"name": "id", "type": "bigint"}],
        }
    }
    if lineage_from is not None:
        source = {"namespace": namespace, "name": lineage_from, "field": "id"}
        facets["columnLineage"] = {
            "_producer": PRODUCER,
            "_schemaURL": LINEAGE_FACET,
            "fields": {"id": {"inputFields": [source]}},
        }
    return {"namespace": namespace, "name": name, "facets": facets}


def run(
    job: tuple[str, str],
    run_id: str,
    start: float,
    end: str | None,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """A run's START (naming its inputs), then its end (`end`: COMPLETE, FAIL, or None: it
    is still running) naming inputs and outputs."""

    def event(kind: str, hours: float, outs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "eventType": kind,
            "eventTime": when(hours),
            "producer": PRODUCER,
            "schemaURL": RUN_EVENT,
            "job": {"namespace": job[0], "name": job[1]},
            "run": {"runId": run_id},
            "inputs": inputs,
            "outputs": outs,
        }

    started = event("START", start, [])
    return [started] if end is None else [started, event(end, start + 0.5, outputs)]


@pytest.fixture(scope="module")
def served(
    pg_server: Server, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, httpx.Client]]:
    """(database url, client) of an API over a store the tests add their events to."""
    log_dir = tmp_path_factory.mktemp("now")
    with serving(pg_server, template_db, log_dir, "now", projector=False, path="/api/v1") as (
        url,
        _,
        client,
    ):
        yield url, client


def fold(url: str, events: list[dict[str, Any]]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        append(conn, events)
    catch_up(url)


def get(client: httpx.Client, path: str, **params: Any) -> Any:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, (path, params, answer.text)
    return answer.json()


def now_and_as_of_now(client: httpx.Client, path: str, **params: Any) -> tuple[Any, Any]:
    """The read without `as_of`, and the same read as of the moment it was answered."""
    now = get(client, path, **params)
    answered = dt.datetime.now(dt.UTC).isoformat()
    return now, get(client, path, **params, as_of=answered)


def ids(client: httpx.Client, namespace: str, what: str) -> dict[str, str]:
    return {i["name"]: i["id"] for i in get(client, f"/{what}", namespace=namespace)["items"]}


# --- item 2: a grouped job ------------------------------------------------------------


class Grouped(NamedTuple):
    """The grouped job's store: ids of its job and datasets, and its two runs."""

    bi_svc: str
    events: str
    activity: str
    sessions: str
    first: str
    latest: str


@pytest.fixture(scope="module")
def grouped(served: tuple[str, httpx.Client]) -> Grouped:
    """A grouped job (Superset's service account, one name for every query) whose first
    query wrote customer_activity and whose latest wrote sessions_daily, each with a field
    edge from the events they read."""
    url, client = served
    ns, trino = "trino://trino:8080", "superset"
    job = (trino, "superset.bi_svc")
    first, latest = str(uuid.uuid4()), str(uuid.uuid4())
    fold(
        url,
        [
            *run(("spark", "load_events"), str(uuid.uuid4()), 0, "COMPLETE", [],
                 [dataset(ns, "lake.events")]),
            *run(job, first, 1, "COMPLETE", [dataset(ns, "lake.events")],
                 [dataset(ns, "lake.customer_activity", "lake.events")]),
            *run(job, latest, 2, "COMPLETE", [dataset(ns, "lake.events")],
                 [dataset(ns, "lake.sessions_daily", "lake.events")]),
        ],
    )  # fmt: skip
    datasets = ids(client, ns, "datasets")
    return Grouped(
        bi_svc=ids(client, trino, "jobs")["superset.bi_svc"],
        events=datasets["lake.events"],
        activity=datasets["lake.customer_activity"],
        sessions=datasets["lake.sessions_daily"],
        first=first,
        latest=latest,
    )


def test_a_grouped_job_now_is_its_latest_run_as_of_now(
    served: tuple[str, httpx.Client], grouped: Grouped
) -> None:
    _, client = served
    events, bi_svc, latest, first = grouped.events, grouped.bi_svc, grouped.latest, grouped.first
    now, then = now_and_as_of_now(
        client, "/lineage", node=f"dataset:{events}", depth=1, direction="downstream"
    )
    assert now == then
    assert {n["name"] for n in now["nodes"]} == {
        "lake.events", "superset.bi_svc", "lake.sessions_daily"
    }  # fmt: skip
    # each edge says when the job first and last made it, and in which run
    for edge in now["edges"]:
        assert edge["last_run"]["id"] == latest
        assert edge["last_seen"] == when(2.5)
    writes = next(e for e in now["edges"] if e["from"]["key"] == f"job:{bi_svc}")
    assert writes["first_seen"] == when(2.5)  # (outputs are named on COMPLETE)
    reads = next(e for e in now["edges"] if e["to"]["key"] == f"job:{bi_svc}")
    assert reads["first_seen"] == when(1)
    # so a diff says why an edge came and went: the run that made it
    diff = get(
        client,
        "/lineage/diff",
        node=f"job:{bi_svc}",
        depth=0,
        **{"from": when(1.75), "to": when(2.75)},
    )
    assert [(e["to"]["key"], e["last_run"]["id"]) for e in diff["edges_added"]] == [
        (f"dataset:{grouped.sessions}", latest)
    ]
    assert [(e["to"]["key"], e["last_run"]["id"]) for e in diff["edges_removed"]] == [
        (f"dataset:{grouped.activity}", first)
    ]
    now, then = now_and_as_of_now(client, "/impact", node=f"dataset:{events}")
    assert now == then
    assert "lake.customer_activity" not in {n["name"] for n in now["nodes"]}
    now, then = now_and_as_of_now(client, f"/jobs/{bi_svc}")
    assert now == then
    assert [d["name"] for d in now["outputs"]] == ["lake.sessions_daily"]
    page = get(client, f"/jobs/{bi_svc}/datasets", direction="output")
    assert [d["name"] for d in page["items"]] == ["lake.sessions_daily"]
    # no longer one of the job's outputs: not one of its producers now, nor its field edge
    activity = grouped.activity
    now, then = now_and_as_of_now(client, f"/datasets/{activity}")
    assert now == then
    assert now["producers"] == [] and now["producer_count"] == 0
    now, then = now_and_as_of_now(client, f"/datasets/{activity}/column-lineage")
    assert now == then
    assert now["edges"] == []


def test_the_cumulative_view_holds_every_run_of_its_window(
    served: tuple[str, httpx.Client], grouped: Grouped
) -> None:
    _, client = served
    job = f"job:{grouped.bi_svc}"
    cumulative = {"node": job, "depth": 0, "view": "cumulative"}
    now, then = now_and_as_of_now(client, "/lineage", **cumulative)
    assert now == then
    outputs = {e["to"]["key"]: e["last_run"]["id"] for e in now["edges"] if e["from"]["key"] == job}
    assert outputs == {
        f"dataset:{grouped.activity}": grouped.first,
        f"dataset:{grouped.sessions}": grouped.latest,
    }
    (reads,) = [e for e in now["edges"] if e["to"]["key"] == job]
    assert reads["last_run"]["id"] == grouped.latest  # (the latest run of the window with it)
    # a window that starts after the first run: the latest run's alone
    windowed = get(client, "/lineage", **cumulative, since=when(1.75))
    assert {e["to"]["key"] for e in windowed["edges"] if e["from"]["key"] == job} == {
        f"dataset:{grouped.sessions}"
    }
    # column lineage follows the same rule: the first query's field edge is back
    lineage = f"/datasets/{grouped.activity}/column-lineage"
    now, then = now_and_as_of_now(client, lineage, view="cumulative")
    assert now == then
    assert [(e["from"]["name"], e["to"]["name"]) for e in now["edges"]] == [
        ("lake.events", "lake.customer_activity")
    ]
    assert get(client, lineage, view="cumulative", since=when(1.75))["edges"] == []
    # a window on the latest view: a job counts if its latest run started in it
    latest = get(client, "/lineage", node=job, depth=0, since=when(1.75))
    assert {e["last_run"]["id"] for e in latest["edges"]} == {grouped.latest}
    assert get(client, "/lineage", node=job, depth=0, since=when(2.25))["edges"] == []
    sessions = f"/datasets/{grouped.sessions}/column-lineage"
    assert len(get(client, sessions, since=when(1.75))["edges"]) == 1
    assert get(client, sessions, since=when(2.25))["edges"] == []


# --- the property: over generated logs ---------------------------------------------------

JOBS, DATASETS = 3, 4
_logs = itertools.count()
# A run: (job, start hour, inputs, outputs, end, its outputs carry a field edge)
runs_of_a_log = st.lists(
    st.tuples(
        st.integers(0, JOBS - 1),
        st.integers(0, 48),
        st.sets(st.integers(0, DATASETS - 1), max_size=2),
        st.sets(st.integers(0, DATASETS - 1), max_size=2),
        st.sampled_from(["COMPLETE", "COMPLETE", "FAIL", None]),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)
# A static declaration (JobEvent): (job, hour, inputs, outputs)
declarations = st.lists(
    st.tuples(
        st.integers(0, JOBS - 1),
        st.integers(0, 48),
        st.sets(st.integers(0, DATASETS - 1), max_size=1),
        st.sets(st.integers(0, DATASETS - 1), min_size=1, max_size=1),
    ),
    max_size=1,
)


def generated_log(runs: list[Any], declared: list[Any]) -> tuple[str, str, list[dict[str, Any]]]:
    """(job namespace, dataset namespace, events) of a generated log, in names of its own."""
    n = next(_logs)
    jobs, ns = f"prop{n}", f"s3://prop{n}"
    events: list[dict[str, Any]] = []
    for k, (job, hour, inputs, outputs, end, field_edges) in enumerate(runs):
        ins = [dataset(ns, f"d{i}") for i in sorted(inputs)]
        source = f"d{min(inputs)}" if inputs and field_edges else None
        outs = [dataset(ns, f"d{o}", source) for o in sorted(outputs - inputs)]
        run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/now/{n}/{k}"))
        events += run((jobs, f"j{job}"), run_id, hour + k / 100, end, ins, outs)
    for job, hour, inputs, outputs in declared:
        events.append(
            {
                "eventTime": when(hour),
                "producer": PRODUCER,
                "schemaURL": JOB_EVENT,
                "job": {"namespace": jobs, "name": f"j{job}"},
                "inputs": [dataset(ns, f"d{i}") for i in sorted(inputs)],
                "outputs": [dataset(ns, f"d{o}") for o in sorted(outputs - inputs)],
            }
        )
    return jobs, ns, events


@settings(
    max_examples=12,
    phases=[Phase.explicit, Phase.generate],
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(runs=runs_of_a_log, declared=declarations)
def test_every_read_now_equals_the_read_as_of_now(
    served: tuple[str, httpx.Client], runs: list[Any], declared: list[Any]
) -> None:
    url, client = served
    jobs_ns, datasets_ns, events = generated_log(runs, declared)
    fold(url, events)
    nodes = [f"job:{i}" for i in ids(client, jobs_ns, "jobs").values()]
    datasets = list(ids(client, datasets_ns, "datasets").values())
    nodes += [f"dataset:{i}" for i in datasets]
    reads: list[tuple[str, dict[str, Any]]] = []
    for node in nodes:
        reads += [
            ("/lineage", {"node": node}),
            ("/lineage", {"node": node, "view": "cumulative", "since": when(24)}),
            ("/impact", {"node": node}),
        ]
        kind, _, id_ = node.partition(":")
        if kind == "job":
            reads.append((f"/jobs/{id_}", {}))
    for id_ in datasets:
        reads += [
            (f"/datasets/{id_}", {}),
            (f"/datasets/{id_}/column-lineage", {"direction": "both"}),
            (f"/datasets/{id_}/column-lineage", {"direction": "both", "view": "cumulative"}),
            (f"/datasets/{id_}/versions", {}),
            (f"/datasets/{id_}/runs", {}),
        ]
    for path, params in reads:
        now, then = now_and_as_of_now(client, path, **params)
        assert now == then, (path, params, events)
    # between two quiet moments (after the last event) nothing changed
    quiet = [when(100), dt.datetime.now(dt.UTC).isoformat()]
    for node in nodes:
        diff = get(client, "/lineage/diff", node=node, **{"from": quiet[0], "to": quiet[1]})
        changes = {k: v for k, v in diff.items() if k not in ("from", "to", "truncated")}
        assert all(v == [] for v in changes.values()), (node, diff, events)


# --- item 11: as-of column lineage, its limits spent after the as_of filter -------------

ALIASES = 2_000
PAIRS = 10  # a report's field edges: 2,001 x 10 of them ever, more than a walk may visit


def many_reports() -> list[dict[str, Any]]:
    """A table known under 2,001 names (a Hive alias each, by a symlinks facet); query k
    (a job each, as Trino names them) writes its k-th name, k minutes after the hour, with
    a columnLineage report of PAIRS fields."""
    ns, hive = "s3://lake", "hive://hms:9083"
    aliases = [
        {"namespace": hive, "name": f"alias.sessions_{k:04d}", "type": "TABLE"}
        for k in range(ALIASES)
    ]
    table = dataset(ns, "wide/sessions")
    table["facets"]["symlinks"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
        "identifiers": aliases,
    }
    events = run(("spark", "create_sessions"), str(uuid.uuid4()), 0, "COMPLETE", [], [table])
    names = [(ns, "wide/sessions"), *((a["namespace"], a["name"]) for a in aliases)]
    source = [{"namespace": ns, "name": "raw/clicks", "field": f"c{f}"} for f in range(PAIRS)]
    for k, (namespace, name) in enumerate(names):
        report = {
            "_producer": PRODUCER,
            "_schemaURL": LINEAGE_FACET,
            "fields": {f"c{f}": {"inputFields": [source[f]]} for f in range(PAIRS)},
        }
        output = {"namespace": namespace, "name": name, "facets": {"columnLineage": report}}
        job = ("trino", f"20260101_{k:06d}_qryid")
        events += run(job, str(uuid.uuid4()), 1 + k / 60, "COMPLETE", [], [output])
    return events


def test_as_of_column_lineage_spends_its_limits_on_the_edges_that_hold(
    served: tuple[str, httpx.Client],
) -> None:
    url, client = served
    fold(url, many_reports())
    (table,) = get(client, "/datasets", namespace="s3://lake", name="wide/sessions")["items"]
    # mid-way through the reports: 100 names reported by then, 10 field edges each
    mid_way = when(1 + 99.5 / 60)
    found = get(client, f"/datasets/{table['id']}/column-lineage", depth=1, as_of=mid_way)
    assert found["truncated"] is False
    assert len(found["edges"]) == 100 * PAIRS
    assert {e["to"]["reported_as"]["name"] for e in found["edges"]} == {
        "wide/sessions",
        *(f"alias.sessions_{k:04d}" for k in range(99)),
    }
