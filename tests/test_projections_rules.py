"""The fold rules that do not depend on arrival order: run states and times, parents and
roots, facet merging, dataset names and merges, poison events."""

from __future__ import annotations

import gc
import random
import string
import uuid
from typing import Any

import psycopg
import pytest
from prometheus_client import REGISTRY

from metastore.eventlog import START
from projections.common import dataset_id, job_id
from projections.fold import read_batch
from projections.replay import rebuild
from projections.runner import catch_up, fold_live_batch
from projections.schema import PROJECTIONS, SIDE_PROJECTIONS
from tests.logdata import append, copies, dump_readmodel
from tests.support import all_scenario_events

Conn = psycopg.Connection[Any]
NS = "rules"

# A dataset's current schema: its version last seen (as GET /datasets/{id} reads it).
CURRENT_FIELDS = (
    "(SELECT v.fields FROM readmodel.dataset_versions v WHERE v.dataset_id = d.id "
    "ORDER BY v.last_event_time DESC, v.last_seq DESC LIMIT 1)"
)


def run_event(
    event_type: str | None,
    minute: int,
    run_id: str,
    job: str = "job",
    *,
    run_facets: dict[str, Any] | None = None,
    job_facets: dict[str, Any] | None = None,
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventTime": f"2026-01-01T10:{minute:02d}:00Z",
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id, "facets": run_facets or {}},
        "job": {"namespace": NS, "name": job, "facets": job_facets or {}},
        "inputs": inputs or [],
        "outputs": outputs or [],
    }
    if event_type is not None:
        event["eventType"] = event_type
    return event


def parent_facet(run_id: str, job: str, root: str | None = None) -> dict[str, Any]:
    facet: dict[str, Any] = {"run": {"runId": run_id}, "job": {"namespace": NS, "name": job}}
    if root:
        facet["root"] = {"run": {"runId": root}, "job": {"namespace": NS, "name": "root"}}
    return {"parent": facet}


def new_id() -> str:
    return str(uuid.uuid4())


def run_row(conn: Conn, run_id: str) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM readmodel.runs WHERE id = %s", (run_id,))
    names = [c.name for c in cur.description or []]
    row = cur.fetchone()
    assert row is not None
    return dict(zip(names, row, strict=True))


def fold(conn: Conn, *events: dict[str, Any]) -> None:
    append(conn, events)
    catch_up(conn)


def test_a_late_start_never_undoes_a_complete(conn: Conn) -> None:
    run = new_id()
    fold(conn, run_event("COMPLETE", 10, run))
    row = run_row(conn, run)  # a run seen only as COMPLETE is a run
    assert (row["state"], row["started_at"], row["ended_at"]) == (
        "COMPLETE",
        None,
        row["state_time"],
    )
    fold(conn, run_event("RUNNING", 5, run), run_event("START", 1, run))
    row = run_row(conn, run)
    assert row["state"] == "COMPLETE"
    assert row["started_at"].minute == 1 and row["ended_at"].minute == 10
    assert row["first_seen"].minute == 1 and row["last_seen"].minute == 10


def test_the_latest_terminal_by_event_time_wins_whatever_arrives_last(conn: Conn) -> None:
    first, second = new_id(), new_id()
    fold(conn, run_event("COMPLETE", 20, first), run_event("FAIL", 10, second))
    fold(conn, run_event("FAIL", 10, first), run_event("COMPLETE", 20, second))
    for run in (first, second):
        row = run_row(conn, run)
        assert row["state"] == "COMPLETE" and row["ended_at"].minute == 20


def test_running_heartbeats_move_the_state_time_but_not_the_start(conn: Conn) -> None:
    run = new_id()
    fold(conn, run_event("START", 1, run), run_event("RUNNING", 3, run))
    fold(conn, run_event("RUNNING", 2, run))
    row = run_row(conn, run)
    assert row["state"] == "RUNNING" and row["state_time"].minute == 3
    assert row["started_at"].minute == 1 and row["ended_at"] is None


def test_children_arriving_before_their_parents_get_the_right_root(conn: Conn) -> None:
    top, middle, leaf = new_id(), new_id(), new_id()
    fold(conn, run_event("START", 3, leaf, "leaf", run_facets=parent_facet(middle, "middle")))
    assert run_row(conn, leaf)["root_run_id"] == uuid.UUID(middle)
    fold(conn, run_event("START", 2, middle, "middle", run_facets=parent_facet(top, "top")))
    assert run_row(conn, leaf)["root_run_id"] == uuid.UUID(top)
    assert run_row(conn, middle)["root_run_id"] == uuid.UUID(top)
    fold(conn, run_event("START", 1, top, "top"))
    for run in (top, middle, leaf):
        assert run_row(conn, run)["root_run_id"] == uuid.UUID(top)
    assert run_row(conn, leaf)["parent_run_id"] == uuid.UUID(middle)
    parent_job = conn.execute(
        "SELECT parent_job_id FROM readmodel.jobs WHERE name = 'leaf'"
    ).fetchone()
    assert parent_job == (job_id(NS, "middle"),)


def test_a_batch_ends_at_its_bytes_and_an_event_larger_than_them_is_one_alone(
    conn: Conn,
) -> None:
    pad = {"pad": {"x": "y" * 5_000}}
    big = [run_event("START", i, new_id(), "big", run_facets=pad) for i in range(3)]
    small = [run_event("START", 10 + i, new_id(), "small") for i in range(4)]
    append(conn, [big[0], *small[:2], big[1], big[2], *small[2:]])
    sizes = [r[0] for r in conn.execute("SELECT size_bytes FROM event_log ORDER BY tx, seq")]
    budget = 2 * max(sizes[1:3]) + 10  # two small events, not three; no large one
    batches, position = [], START
    while (batch := read_batch(conn, position, 100, max_bytes=budget)).last is not None:
        batches.append((batch.read, batch.full))
        position = batch.last
    assert batches == [(1, True), (2, True), (1, True), (1, True), (2, False)]
    catch_up(conn, limit=100)  # (each batch then has a full one after it: to the end)
    assert conn.execute("SELECT count(*) FROM readmodel.runs").fetchone() == (7,)


def test_a_batch_read_ahead_then_continued_keeps_to_its_limits_and_reads_each_event_once(
    conn: Conn,
) -> None:
    """The projector reads ahead of a batch that ended where the log did (the live fold)
    and reads the rest when the next batch begins: the two parts are one batch's events,
    within one batch's bytes and count (no exception for the rest's first event)."""
    pad = {"pad": {"x": "y" * 5_000}}
    small = [run_event("START", i, new_id(), "small") for i in range(4)]
    append(conn, small[:1])
    first = read_batch(conn, START, 100)
    assert (first.read, first.full) == (1, False)
    append(conn, [small[1], run_event("START", 9, new_id(), "big", run_facets=pad), *small[2:]])
    sizes = [r[0] for r in conn.execute("SELECT size_bytes FROM event_log ORDER BY tx, seq")]
    budget = sum(sizes[:2]) + 10  # the first two events, not the large third
    assert first.last is not None
    rest = read_batch(conn, first.last, 100, max_bytes=budget, continues=first)
    alone = read_batch(conn, START, 100, max_bytes=budget)
    assert [e.position for e in rest.events] == [e.position for e in alone.events]
    assert (rest.read, rest.full, rest.heavy, rest.size) == (2, True, True, sum(sizes[:2]))
    counted = read_batch(conn, first.last, 3, continues=first)
    assert (counted.read, counted.full, counted.heavy) == (3, True, False)


def test_a_parent_cycle_folded_a_run_at_a_time_stops_where_it_closes(conn: Conn) -> None:
    """Each run's root is the run below it in the cycle (the walk stops before it comes
    back), whichever batch closes the cycle; and a run above it is the root of neither."""
    a, b, c = new_id(), new_id(), new_id()
    fold(conn, run_event("START", 1, a, "a", run_facets=parent_facet(b, "b")))
    fold(conn, run_event("START", 2, b, "b", run_facets=parent_facet(c, "c")))
    fold(conn, run_event("START", 3, c, "c", run_facets=parent_facet(a, "a")))
    roots = {r: run_row(conn, r)["root_run_id"] for r in (a, b, c)}
    assert roots == {a: uuid.UUID(c), b: uuid.UUID(a), c: uuid.UUID(b)}
    assert run_row(conn, a)["root_path"] == [uuid.UUID(b), uuid.UUID(c)]


def test_the_parent_facets_root_is_taken_when_given(conn: Conn) -> None:
    root, parent, child = new_id(), new_id(), new_id()
    fold(conn, run_event("START", 1, child, "c", run_facets=parent_facet(parent, "p", root)))
    assert run_row(conn, child)["root_run_id"] == uuid.UUID(root)


def test_run_facets_merge_and_give_nominal_time_and_error(conn: Conn) -> None:
    run = new_id()
    nominal = {"nominalTime": {"nominalStartTime": "2026-01-01T00:00:00Z"}}
    error = {"errorMessage": {"message": "boom", "programmingLanguage": "python"}}
    fold(conn, run_event("START", 1, run, run_facets={**nominal, "custom": {"v": 1}}))
    fold(conn, run_event("FAIL", 2, run, run_facets=error))
    row = run_row(conn, run)
    assert row["error_message"] == "boom"
    assert row["nominal_start"].year == 2026 and row["nominal_end"] is None
    assert set(row["facets"]) == {"nominalTime", "custom", "errorMessage"}


def test_job_facets_replace_by_name_and_deletion_sticks(conn: Conn) -> None:
    job_type = {"jobType": {"processingType": "BATCH", "integration": "SPARK", "jobType": "JOB"}}
    fold(conn, run_event("START", 1, new_id(), job_facets={**job_type, "doc": {"d": "old"}}))
    fold(conn, run_event("START", 3, new_id(), job_facets={"doc": {"_deleted": True}}))
    fold(conn, run_event("START", 2, new_id(), job_facets={"doc": {"d": "older, late"}}))
    row = conn.execute(
        "SELECT facets, job_type, processing_type, integration FROM readmodel.jobs WHERE id = %s",
        (job_id(NS, "job"),),
    ).fetchone()
    assert row is not None
    assert "doc" not in row[0]
    assert row[1:] == ("JOB", "BATCH", "SPARK")


def symlinked(namespace: str, name: str, *links: tuple[str, str]) -> dict[str, Any]:
    identifiers = [{"namespace": ns, "name": n, "type": "TABLE"} for ns, n in links]
    return {
        "namespace": namespace,
        "name": name,
        "facets": {"symlinks": {"identifiers": identifiers}} if links else {},
    }


def schema(*names: str) -> dict[str, Any]:
    return {"schema": {"fields": [{"name": n, "type": "string"} for n in names]}}


def test_a_symlink_joining_two_datasets_merges_them_into_the_first_seen(conn: Conn) -> None:
    a, b = ("s3", "warehouse/t"), ("hive", "db.t")
    fold(
        conn,
        run_event(
            "COMPLETE",
            1,
            new_id(),
            "w1",
            outputs=[{"namespace": a[0], "name": a[1], "facets": schema("x")}],
        ),
    )
    fold(
        conn,
        run_event(
            "COMPLETE",
            2,
            new_id(),
            "w2",
            outputs=[{"namespace": b[0], "name": b[1], "facets": schema("x", "y")}],
        ),
    )
    ids = dict(conn.execute("SELECT name, dataset_id FROM readmodel.dataset_names").fetchall())
    assert ids == {a[1]: dataset_id(*a), b[1]: dataset_id(*b)}
    fold(conn, run_event("COMPLETE", 3, new_id(), "w3", inputs=[symlinked(*a, b)]))
    ids = dict(conn.execute("SELECT name, dataset_id FROM readmodel.dataset_names").fetchall())
    assert ids == {a[1]: dataset_id(*a), b[1]: dataset_id(*a)}
    merged = conn.execute(
        "SELECT merged_into FROM readmodel.datasets WHERE id = %s", (dataset_id(*b),)
    ).fetchone()
    assert merged == (dataset_id(*a),)
    versions = conn.execute(
        "SELECT fields, run_id IS NOT NULL FROM readmodel.dataset_versions "
        "WHERE dataset_id = %s ORDER BY event_time, seq",
        (dataset_id(*a),),
    ).fetchall()
    assert [[f["name"] for f in v[0]] for v in versions] == [["x"], ["x", "y"]]
    current = conn.execute(
        f"SELECT {CURRENT_FIELDS} FROM readmodel.datasets d WHERE id = %s", (dataset_id(*a),)
    ).fetchone()
    assert current is not None and [f["name"] for f in current[0]] == ["x", "y"]
    # A replay of the same log hands out the same ids.
    before = dump_readmodel(conn)
    rebuild(conn.info.dsn, [p.NAME for p in PROJECTIONS])
    assert dump_readmodel(conn) == before


def test_schema_versions_are_the_same_folded_one_by_one_or_in_one_batch(conn: Conn) -> None:
    # A batch loads only the versions it can change (its schemas' hashes, and the current
    # one), every version only for a merge: event by event, the old schema comes back after
    # another, and a merge moves versions the merging batch never named.
    a, b = ("s3", "warehouse/v"), ("hive", "db.v")

    def output(where: tuple[str, str], *fields: str, links: tuple[str, str] | None = None):
        ref = symlinked(*where, *([links] if links else []))
        return {**ref, "facets": {**ref["facets"], **schema(*fields)}}

    events = [
        run_event("COMPLETE", 1, new_id(), "v1", outputs=[output(a, "x")]),
        run_event("COMPLETE", 2, new_id(), "v1", outputs=[output(a, "x", "y")]),
        run_event("COMPLETE", 3, new_id(), "v1", outputs=[output(a, "x")]),
        run_event("COMPLETE", 4, new_id(), "v2", outputs=[output(b, "z")]),
        run_event("COMPLETE", 5, new_id(), "v2", outputs=[output(b, "x", "y")]),
        run_event("COMPLETE", 6, new_id(), "v3", outputs=[output(b, "z", links=a)]),
        run_event("COMPLETE", 7, new_id(), "v1", outputs=[output(a, "w")]),
        # seen again without a schema, then an older schema arriving late: neither is current
        run_event("COMPLETE", 8, new_id(), "v1", outputs=[symlinked(*a)]),
        run_event("COMPLETE", 0, new_id(), "v0", outputs=[output(a, "q")]),
    ]
    append(conn, events)
    assert catch_up(conn, limit=1) == len(events)
    one_by_one = dump_readmodel(conn)
    versions = conn.execute(
        "SELECT fields, event_time, last_event_time FROM readmodel.dataset_versions "
        "WHERE dataset_id = %s ORDER BY event_time, seq",
        (dataset_id(*a),),
    ).fetchall()
    minutes = [([f["name"] for f in v[0]], v[1].minute, v[2].minute) for v in versions]
    assert minutes == [
        (["q"], 0, 0),
        (["x"], 1, 3),
        (["x", "y"], 2, 5),
        (["z"], 4, 6),
        (["w"], 7, 7),
    ]
    assert conn.execute(
        "SELECT count(*) FROM readmodel.dataset_versions WHERE dataset_id = %s",
        (dataset_id(*b),),
    ).fetchone() == (0,)
    current = conn.execute(
        f"SELECT {CURRENT_FIELDS} FROM readmodel.datasets d WHERE id = %s", (dataset_id(*a),)
    ).fetchone()
    assert current is not None and [f["name"] for f in current[0]] == ["w"]
    rebuild(conn.info.dsn, [p.NAME for p in PROJECTIONS])  # the whole log in one batch
    assert dump_readmodel(conn) == one_by_one


@pytest.mark.parametrize("connections", ["one connection", "two connections"])
def test_a_poison_event_is_dead_lettered_and_the_rest_folded(conn: Conn, connections: str) -> None:
    # A dataset name too long for a btree index cannot be stored: the fold of that event
    # fails, in the projections that index dataset names only. `datasets` folds on the
    # main connection and `lineage` on the side one, when there are two (the projector's).
    huge = "".join(random.choices(string.ascii_letters + string.digits, k=12000))
    good, bad = new_id(), new_id()
    append(conn, [run_event("START", 1, good, inputs=[{"namespace": "ns", "name": "ok"}])])
    append(conn, [run_event("START", 2, bad, inputs=[{"namespace": "ns", "name": huge}])])
    append(conn, [run_event("COMPLETE", 3, good, inputs=[{"namespace": "ns", "name": "ok"}])])
    assert catch_up(conn if connections == "one connection" else conn.info.dsn) == 3
    letters = conn.execute("SELECT projection, error FROM dead_letters").fetchall()
    assert {p for p, _ in letters} == {"datasets", "lineage"}
    assert all("index row" in error for _, error in letters)
    assert run_row(conn, good)["state"] == "COMPLETE"
    assert run_row(conn, bad)["state"] == "START"
    assert (
        conn.execute(
            "SELECT last_seen FROM readmodel.run_edges WHERE run_id = %s", (good,)
        ).fetchone()
        is not None
    )
    folded = dict(conn.execute("SELECT name, events_folded FROM projection_state").fetchall())
    assert set(folded.values()) == {3}


def test_a_malformed_parent_facet_is_ignored_and_counted(conn: Conn) -> None:
    before = (
        REGISTRY.get_sample_value("metastore_projector_malformed_facets_total", {"facet": "parent"})
        or 0
    )
    run = new_id()
    fold(conn, run_event("START", 1, run, run_facets={"parent": {"run": {"noRunId": "x"}}}))
    row = run_row(conn, run)
    assert row["parent_run_id"] is None and row["root_run_id"] == uuid.UUID(run)
    after = REGISTRY.get_sample_value(
        "metastore_projector_malformed_facets_total", {"facet": "parent"}
    )
    assert after is not None and after > before


def test_a_schema_seen_again_is_each_datasets_and_a_malformed_one_counts_each_time(
    conn: Conn,
) -> None:
    # The decoder keeps a schema's fields by the facet's bytes (projections.decode.schema_of):
    # the same schema on another dataset is that dataset's, and a malformed one is not kept.
    def malformed_schemas() -> float:
        return (
            REGISTRY.get_sample_value(
                "metastore_projector_malformed_facets_total", {"facet": "schema"}
            )
            or 0
        )

    before = malformed_schemas()
    for minute in (1, 2):
        outputs = [
            {"namespace": "s3", "name": f"t{minute}", "facets": schema("x", "y")},
            {"namespace": "s3", "name": "bad", "facets": {"schema": {"fields": "x, y"}}},
        ]
        fold(conn, run_event("COMPLETE", minute, new_id(), "w", outputs=outputs))
    assert malformed_schemas() == before + 2
    fields = dict(
        conn.execute(f"SELECT name, {CURRENT_FIELDS} FROM readmodel.datasets d").fetchall()
    )
    expected = [{"name": "x", "type": "string"}, {"name": "y", "type": "string"}]
    assert fields == {"t1": expected, "t2": expected, "bad": None}


def test_folding_leaves_the_collectors_thresholds_as_it_found_them(conn: Conn) -> None:
    # The fold raises the young generation's threshold for its batches (projections/fold.py);
    # a process that folds (the tests, a tool calling catch_up) keeps its own settings.
    previous = gc.get_threshold()
    gc.set_threshold(500, 5, 5)
    try:
        fold(conn, run_event("START", 1, new_id()))
        assert gc.get_threshold() == (500, 5, 5)
        rebuild(conn.info.dsn, ["runs"])
        assert gc.get_threshold() == (500, 5, 5)
    finally:
        gc.set_threshold(*previous)


def test_side_projections_left_behind_by_a_crash_catch_up_alone(conn: Conn) -> None:
    # The projector commits the side connection's projections just after the others: a
    # crash between the two commits leaves them a batch behind. The next fold must bring
    # them up without folding the others' events twice.
    total = append(conn, copies(all_scenario_events(), 3))
    main = [p for p in PROJECTIONS if p.NAME not in SIDE_PROJECTIONS]
    assert fold_live_batch(conn, main, limit=total // 2).read == total // 2
    assert catch_up(conn.info.dsn) == total
    folded = dict(conn.execute("SELECT name, events_folded FROM projection_state").fetchall())
    assert folded == dict.fromkeys(folded, total) and set(folded) == {p.NAME for p in PROJECTIONS}
    incremental = dump_readmodel(conn)
    rebuild(conn.info.dsn, [p.NAME for p in PROJECTIONS])
    assert dump_readmodel(conn) == incremental


@pytest.mark.parametrize("order", ["as emitted", "reversed"])
def test_only_a_completed_run_or_a_streaming_one_writes(conn: Conn, order: str) -> None:
    """A run writes its outputs when it COMPLETEs (those its START named too), a STREAMING
    job at each RUNNING event naming them, unless it ends FAIL or ABORT: then it only
    attempted them (the stream that FAILs after RUNNING too). One event a batch, so a
    completion and the outputs it writes are folded apart."""
    from tests.test_projector_properties import write_events

    events = write_events()
    append(conn, events if order == "as emitted" else events[::-1])
    catch_up(conn, limit=1)
    writes = dict(
        conn.execute(
            "SELECT run_id::text, (first_write_at, last_write_at)::text FROM readmodel.run_edges "
            "WHERE direction = 'output'"
        ).fetchall()
    )
    failed, aborted, quiet, stream = (events[i]["run"]["runId"] for i in (0, 2, 4, 6))
    assert writes == {
        failed: "(,)",
        aborted: "(,)",
        quiet: '("2026-09-04 10:02:00+00","2026-09-04 10:02:00+00")',
        stream: "(,)",
    }
    edges = conn.execute(
        "SELECT j.name, e.last_write_at::text, e.last_write_run::text, e.attempt_at::text, "
        "e.attempt_run::text, e.attempt_state FROM readmodel.job_edges e "
        "JOIN readmodel.jobs j ON j.id = e.job_id WHERE e.direction = 'output' ORDER BY 1"
    ).fetchall()
    spark = "orders_etl.execute_replace_table_as_select_command"
    assert edges == [
        (spark, "2026-09-04 10:02:00+00", quiet, "2026-09-03 11:01:00+00", aborted, "ABORT"),
        ("orders_stream", None, None, "2026-09-05 02:30:00+00", stream, "FAIL"),
    ]  # fmt: skip
    # an attempt's schema is no version, nor a START's, nor that of the stream's RUNNING:
    # it FAILed after, in another batch (issue 48 item 9)
    versions = conn.execute("SELECT run_id::text FROM readmodel.dataset_versions").fetchall()
    assert versions == []
