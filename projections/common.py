"""What every projection's fold shares: the decoded event, facet merging, order keys.

Order-independence: every "latest" rule compares the key `[eventTime in µs, seq]`, so
the result of folding a set of events does not depend on the order they arrive in (only
exact ties in eventTime fall back to log order).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec
import psycopg
from psycopg.rows import DictRow, dict_row

from metastore import pgarray
from metastore.eventlog import Position
from metastore.metrics import MALFORMED_FACETS

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
TERMINAL_STATES = frozenset({"COMPLETE", "FAIL", "ABORT"})
FAILED_STATES = frozenset({"FAIL", "ABORT"})
# Job ids are uuid5 of the job's name, so they are the same after any replay.
JOB_ID_NAMESPACE = uuid.UUID("6f1d9f0e-8a51-4f43-9d5e-1c1f5a7c2b10")
DATASET_ID_NAMESPACE = uuid.UUID("3b4e3c8a-2d8e-4b54-a1a4-6f8f0f3d9e21")


# Facets as the folds keep them: name -> the facet's JSON, undecoded. Merging facets only
# needs their names; the few facets a projection reads are decoded where it reads them
# (`facet`), so large ones (Spark's logical plan) are never parsed into Python objects.
Facets = dict[str, msgspec.Raw]


class FoldEvent(msgspec.Struct, frozen=True):
    """An event as the folds see it: its log position, envelope columns and facets.

    Made by `projections.decode.fold_event`, which also works out once what several
    folds read (the order key, the parent facet, per dataset the schema and column
    lineage), on the prefetcher's thread while the folding thread waits on the server.
    """

    position: Position
    received_at: dt.datetime
    event_time: dt.datetime
    kind: str
    event_type: str | None
    run_id: uuid.UUID | None
    job_namespace: str | None
    job_name: str | None
    run_facets: Facets | None = None
    job_facets: Facets | None = None
    job_id: uuid.UUID | None = None  # of (job_namespace, job_name)
    refs: list[DatasetRef] = []  # the datasets it names
    # The key every latest-wins rule compares: [eventTime µs, seq] (JSON-storable). Shared
    # by the rows it is stored in: never mutated.
    order: list[int] = []
    parent: ParentRef | None = None  # the `parent` run facet of a run event
    producer: str | None = None  # the event's `producer` URL
    # Whether this run event writes the outputs it names (decode.writes_outputs): a
    # COMPLETE, or a RUNNING of a STREAMING job. Any other names them as an attempt.
    writes: bool = False

    @property
    def seq(self) -> int:
        return self.position.seq

    def observes(self, ref: DatasetRef) -> bool:
        """Whether `ref`'s facets and schema describe the dataset as it is: an output of a
        run event only when the event writes it; an output a run only attempted (a START,
        a FAIL, ...) describes data that may never exist."""
        return self.writes or ref.role != "output" or self.kind != "run"

    def versions(self, ref: DatasetRef) -> bool:
        """Whether `ref`'s schema is a version of the dataset: what a write produced (or a
        DatasetEvent or JobEvent declares). A reader's schema is its view of the data (Trino
        reads Spark's `long` as `bigint`): an observation (history.reader_schemas), never a
        version, nor the dataset's `schema` facet."""
        return ref.role != "input" and self.observes(ref)


# A runId is one run of one job: the job of its first event in the log (a replay keeps log
# order, so it picks the same). Another job's events with that runId (a producer reusing
# ids) are not that run's: runs, jobs' latest run and lineage leave them out, so every
# answer names the run under its job alone. `runs` keeps the job of the run's first event
# folded; the others ask the log (run_facts: an index probe a run and partition), so each
# projection rebuilds alone. The run's first event is the run index's first entry at or
# after (run, 0, 0), in the order only that index has (then checked to be the run's): with
# `run_id =` and ORDER BY (tx, seq), a run whose events are a large share of a partition's
# statistics (a streaming run) made the position index look as good, and it read every
# event logged before the run's first.
FIRST_JOB_OF_RUNS = """
SELECT r.run_id, f.job_namespace, f.job_name
FROM unnest(%b::uuid[]) AS r(run_id)
CROSS JOIN LATERAL (
    SELECT l.run_id, l.job_namespace, l.job_name FROM event_log l
    WHERE (l.run_id, l.tx, l.seq) >= (r.run_id, '0'::xid8, 0) AND l.run_id IS NOT NULL
      AND l.job_namespace IS NOT NULL AND l.job_name IS NOT NULL
    ORDER BY l.run_id, l.tx, l.seq LIMIT 1) f
WHERE f.run_id = r.run_id
"""


def run_owners(
    stored: Mapping[uuid.UUID, uuid.UUID], events: Sequence[FoldEvent]
) -> dict[uuid.UUID, uuid.UUID]:
    """The job each run of `events` belongs to: `stored` (the job of its first event
    folded before), else the job of its first event in the log among `events`."""
    owners = dict(stored)
    for event in sorted(events, key=lambda e: e.position):
        if event.kind == "run" and event.run_id is not None and event.job_id is not None:
            owners.setdefault(event.run_id, event.job_id)
    return owners


class RunFacts(msgspec.Struct, frozen=True):
    """What the log says of a run, for the folds that keep no runs: its job (its first
    event's: FIRST_JOB_OF_RUNS) and whether it ended FAIL or ABORT (its job's latest
    terminal event by eventTime, then seq, as the runs projection's state), when it
    wrote nothing (README "Which run writes")."""

    job_id: uuid.UUID | None
    failed: bool


NO_RUN = uuid.UUID(int=0)  # the run id a row keyed by run gets for an event without one
# The log is asked, not another projection's tables: each projection rebuilds alone, and
# an event not folded yet (a FAIL logged after the COMPLETE) only settles sooner.
# A run's terminal events are found by the run index alone (OFFSET 0), then kept if its
# job's, as asof.RUN_AT_LOG: with the job's name in the same scan and a partition not yet
# analyzed (a new month, a restore), PostgreSQL probed the job index instead and read every
# event of the job for each run (10,000 runs of one job: 5.4 s a batch, 37 ms this way).
RUN_FACTS = f"""
SELECT f.run_id, f.job_namespace, f.job_name, coalesce(e.event_type IN ('FAIL', 'ABORT'), false)
FROM ({FIRST_JOB_OF_RUNS}) f
LEFT JOIN LATERAL (
    SELECT l.event_type FROM (
        SELECT l.event_type, l.event_time, l.seq, l.job_namespace, l.job_name
        FROM event_log l
        WHERE l.run_id = f.run_id AND l.event_type IN ('COMPLETE', 'FAIL', 'ABORT')
        OFFSET 0) l
    WHERE l.job_namespace = f.job_namespace AND l.job_name = f.job_name
    ORDER BY l.event_time DESC, l.seq DESC LIMIT 1) e ON true
"""


# The last batch's RunFacts, per thread (a rebuild folds on a thread of its own): the folds
# of one batch ask once. Asked again on the side connection, whose writes are pipelined,
# a projection would wait for the writes queued before it (fold.fold_pipelined).
_asked = threading.local()


def run_facts(cur: psycopg.Cursor[Any], events: Sequence[FoldEvent]) -> dict[uuid.UUID, RunFacts]:
    """The RunFacts of the runs `events` name (one index probe each per partition), asked
    once a batch (the same runs between the same log positions)."""
    if not events:
        return {}
    last = getattr(_asked, "last", None)
    # The projections of a batch are given the same list: known by its identity and span
    # (not held: a batch's memory is the prefetcher's to bound), before the key whose set
    # of runs hashed and compared every run id again for each projection.
    same = (id(events), len(events), events[0].position, events[-1].position)
    if last is not None and last[0] == same:
        return last[2]
    runs = run_ids(events)
    if not runs:
        return {}
    key = (events[0].position, events[-1].position, frozenset(runs))
    if last is not None and last[1] == key:
        _asked.last = (same, key, last[2])
        return last[2]
    # Planned once (planner_without): each lateral's probes are its one plan by index.
    with cur.connection.cursor() as pcur, planner_without(pcur, *INDEX_PROBES_ONLY, plan_once=True):
        pgarray.register(pcur)
        rows = pcur.execute(RUN_FACTS, (pgarray.uuid_array(list(runs)),)).fetchall()
    facts = {run: RunFacts(job_id(ns, name), failed) for run, ns, name, failed in rows}
    _asked.last = (same, key, facts)
    return facts


def of_another_job(event: FoldEvent, facts: Mapping[uuid.UUID, RunFacts]) -> bool:
    """Whether `event` reuses the runId of another job's run: not that run's (see
    FIRST_JOB_OF_RUNS), so no fold takes what it names."""
    if event.kind != "run" or event.run_id is None or event.run_id not in facts:
        return False
    return facts[event.run_id].job_id != event.job_id


def ended_failed(event: FoldEvent, facts: Mapping[uuid.UUID, RunFacts]) -> bool:
    """Whether `event` is of a run that ended FAIL or ABORT: it wrote nothing."""
    if event.kind != "run" or event.run_id is None:
        return False
    found = facts.get(event.run_id)
    return found is not None and found.failed


def run_ids(events: Sequence[FoldEvent]) -> set[uuid.UUID]:
    return {e.run_id for e in events if e.kind == "run" and e.run_id is not None}


ONE_MICROSECOND = dt.timedelta(microseconds=1)  # made once, not per call of micros()


def micros(when: dt.datetime) -> int:
    return (when - EPOCH) // ONE_MICROSECOND


# Cached: a job's events come close together, so most calls hit, and uuid5 is not cheap.
# dataset_id is not: it is only called for a name not seen before, so a cache never hits.
@functools.lru_cache(maxsize=4096)
def job_id(namespace: str, name: str) -> uuid.UUID:
    return uuid.uuid5(JOB_ID_NAMESPACE, f"{namespace}\x00{name}")


def dataset_id(namespace: str, name: str) -> uuid.UUID:
    return uuid.uuid5(DATASET_ID_NAMESPACE, f"{namespace}\x00{name}")


# The facet label of the malformed-facets counter: the facets the folds read by name, and
# the sections that hold facets. Any other name comes from the events themselves, so it is
# counted as "other": a label per name would let the log grow the projector's memory (and
# /metrics) without bound, one series per made-up facet name.
MALFORMED_LABELS = frozenset(
    {
        "parent",
        "nominalTime",
        "errorMessage",
        "jobType",
        "schema",
        "symlinks",
        "catalog",
        "columnLineage",
        "run.facets",
        "job.facets",
        "dataset.facets",
    }
)


def malformed(facet: str) -> None:
    MALFORMED_FACETS.labels(facet=facet if facet in MALFORMED_LABELS else "other").inc()


def as_dict(value: Any, facet: str | None = None) -> dict[str, Any] | None:
    """`value` when it is a JSON object; otherwise None (counted when it names a facet)."""
    if isinstance(value, dict):
        return value
    if value is not None and facet is not None:
        malformed(facet)
    return None


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def facet(facets: Facets | None, name: str) -> dict[str, Any] | None:
    """The decoded facet `name`, or None when absent, not a JSON object, or holding what
    Python cannot decode (a number beyond float64, like 1e400; counted)."""
    if not facets:
        return None
    raw = facets.get(name)
    if raw is None:
        return None
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        value = None
    if isinstance(value, dict):
        return value
    malformed(name)
    return None


def _is_deletion(view: memoryview) -> bool:
    # A deletion marker is tiny: `{"_deleted": true}` (and maybe _producer, _schemaURL).
    if len(view) > 512 or b'"_deleted"' not in view.tobytes():
        return False
    try:
        value = msgspec.json.decode(view)
    except msgspec.DecodeError:  # (1e400 beside it: not the marker, a facet)
        return False
    return isinstance(value, dict) and value.get("_deleted") is True


# What `merge_facets` changed (bits): the order times only, or the facets themselves. A
# producer re-sends the same facets with every event; only a change of content needs the
# (large) facets document rewritten. Content is compared as bytes: the facets columns are
# json, stored as the fold wrote them (each facet as sent), so a repeat matches within a
# batch and after a load alike.
TIMES_CHANGED = 1
FACETS_CHANGED = 2


def merge_facets(
    facets: Facets, times: dict[str, Any], incoming: Facets | None, order: list[int]
) -> int:
    """Merges facets the spec's way, latest by `order` wins per facet name.

    A facet replaces the facet of the same name; `{"_deleted": true}` removes it. The
    deletion is kept in `times`, so an older facet arriving later does not bring it back.
    Returns what changed: 0, or TIMES_CHANGED with FACETS_CHANGED when the content did.
    """
    if not incoming:
        return 0
    changed = 0
    for name, value in incoming.items():
        previous = times.get(name)
        if previous is not None and previous >= order:
            continue
        current = facets.get(name)
        if current is None or current != value:
            # (the same bytes as the facet in place were checked when it was merged)
            view = memoryview(value)
            if not view or view[0] != 0x7B:  # "{": a facet is a JSON object
                malformed(name)
                continue
            if _is_deletion(view):
                if current is not None:
                    del facets[name]
                    changed |= FACETS_CHANGED
            else:
                facets[name] = value
                changed |= FACETS_CHANGED
        times[name] = order
        changed |= TIMES_CHANGED
    return changed


def parse_time(value: Any) -> dt.datetime | None:
    """An ISO-8601 timestamp in UTC (zone-less means UTC), or None.

    In UTC: PostgreSQL refuses an offset beyond 15:59 ("+23:59" is valid ISO 8601), and an
    offset can carry a time past year 1 or 9999, which then has no UTC value here (None).
    """
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
        return parsed.astimezone(dt.UTC) if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    except (ValueError, OverflowError):
        return None


def parse_uuid(value: Any) -> uuid.UUID | None:
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


class ParentRef(msgspec.Struct, frozen=True):
    run_id: uuid.UUID
    job_namespace: str | None
    job_name: str | None
    root_run_id: uuid.UUID | None


def parent_ref(run_facets: Facets | None) -> ParentRef | None:
    """The `parent` run facet (run.runId required; job and root optional), or None."""
    parent = facet(run_facets, "parent")
    if parent is None:
        return None
    run = as_dict(parent.get("run"))
    run_id = parse_uuid(run.get("runId")) if run else None
    if run_id is None:
        malformed("parent")
        return None
    job = as_dict(parent.get("job")) or {}
    root = as_dict(parent.get("root")) or {}
    root_run = as_dict(root.get("run")) or {}
    return ParentRef(
        run_id, text(job.get("namespace")), text(job.get("name")), parse_uuid(root_run.get("runId"))
    )


def loading_cursor(cur: psycopg.Cursor[Any]) -> psycopg.Cursor[DictRow]:
    """A dict-row cursor on `cur`'s connection for a projection's loads, whose id and name
    lists go as binary arrays (metastore/pgarray.py): psycopg dumps a list parameter
    element by element in Python, several times slower."""
    dcur = cur.connection.cursor(row_factory=dict_row)
    pgarray.register(dcur)
    return dcur


def json_text(value: Any) -> str:
    return msgspec.json.encode(value).decode()


@contextlib.contextmanager
def planner_without(
    conn: psycopg.Connection[Any] | psycopg.Cursor[Any], *methods: str, plan_once: bool = False
) -> Iterator[None]:
    """Turns the planner's `methods` (`enable_sort`, ...) off for the block's statements.

    In the open transaction (set_config's is_local), then back to what they were, so the
    fold's other statements keep the session's plans (an error rolls the transaction back,
    and the settings with it). One statement each way: a SET LOCAL and a RESET a method
    were eight statements a block, 56 of a live batch's 95 (docs/PERFORMANCE.md).

    `plan_once`: a statement psycopg has prepared keeps its generic plan (plan_cache_mode
    force_generic_plan) instead of the folding sessions' plan each execution
    (fold.tune_session). For the reads of the log alone, whose every plan is the same
    index probes once `methods` are off: planning them looks at every monthly partition,
    so each batch paid more for them with each month of the log: with 24 months more, a
    live batch of 50 planned them in 5.0 ms instead of 1.1 (docs/PERFORMANCE.md, "The
    log's reads planned once").
    """
    off, restore = _planner_switches(methods, plan_once)
    conn.execute(off)
    yield
    conn.execute(restore)


@functools.cache
def _planner_switches(methods: tuple[str, ...], plan_once: bool) -> tuple[str, str]:
    """local_settings of `methods` off (and, `plan_once`, plans kept)."""
    settings = [(m, "off") for m in methods]
    if plan_once:
        settings.append(("plan_cache_mode", "force_generic_plan"))
    return local_settings(tuple(settings))


# The rows of `{table}` (as `{alias}`) whose primary key starts with `{values}` (its
# leading columns `{key}`), at most {rows}: the row comparison and the order can only be
# served by that primary key, and the LIMIT keeps the caller's equalities out of the probe,
# so no statistics can make it scan an index on (namespace, name), every job or run that
# ever touched the name (20,000 Trino queries writing one table: 43 s), edge by edge. The
# caller keeps the rows equal to `{values}`. (The reads' and the fold's settles' probe.)
KEY_PROBE = """(SELECT {select} FROM {table} {alias}
                WHERE ({key}) >= ({values}) ORDER BY {key} LIMIT {rows})"""


def key_probe(
    table: str,
    alias: str,
    key: tuple[str, ...],
    values: str,
    rows: int = 1,
    select: str | None = None,
) -> str:
    """KEY_PROBE of `table`'s rows (`select`: the columns it gives, all by default)."""
    columns = ", ".join(f"{alias}.{k}" for k in key)
    return KEY_PROBE.format(
        select=select or f"{alias}.*",
        table=table,
        alias=alias,
        key=columns,
        values=values,
        rows=rows,
    )


@functools.cache
def local_settings(settings: tuple[tuple[str, str], ...]) -> tuple[str, str]:
    """One statement giving each (setting, value) of `settings` in the open transaction,
    each setting's value before kept in a placeholder setting of its own (set first: it is
    the argument), and one statement giving them back."""
    give = ", ".join(
        f"set_config('{s}', '{value}' || left(set_config('metastore.before_{s}', "
        f"current_setting('{s}'), true), 0), true)"
        for s, value in settings
    )
    back = ", ".join(
        f"set_config('{s}', current_setting('metastore.before_{s}'), true)" for s, _ in settings
    )
    return f"SELECT {give}", f"SELECT {back}"


# An UPDATE ... FROM unnest(ids) matches a batch's few hundred ids against a whole table
# (runs by root, names by dataset). With statistics from when the table was small, the
# planner expected hundreds of matches per id and hashed the whole table: a sequential
# scan of `runs` every batch, growing with the table, so a replay cost O(n²). With hash
# and merge joins off for the statement it probes the index once per id. Sequential scans
# and materializing too: with statistics from when the table was nearly empty (a fresh
# store, or before autovacuum's first ANALYZE) the nested loop's inner side was the whole
# table read once, kept, and compared with each id (lineage's settle of a batch's run
# edges: 682,440 rows compared for 242 runs, 114-260 ms a batch and growing with the table,
# which held the projection lag's tail at seconds).
INDEX_PROBES_ONLY = ("enable_hashjoin", "enable_mergejoin", "enable_seqscan", "enable_material")


# --- writing rows -----------------------------------------------------------------------
# Each fold writes its rows with one INSERT ... SELECT per table. The rows go column by
# column, each a binary array parameter (metastore.pgarray.column_array) that the server
# reads as it is. As one jsonb document of row arrays (msgspec's encoding: a quarter of the
# Python time these arrays take) the server parsed the document, then cast each element from
# text, a timestamp's text the slowest: 2,000 rows of 17 columns took 20 ms of its time that
# way, 7 as arrays, and the fold 10 % less of the server's CPU in all (docs/PERFORMANCE.md,
# "The fold's rows as binary arrays").
# A `json` or `jsonb` column (the facet documents) goes as text[] and is cast: json only
# checks its text, jsonb parses it as the document did. A `uuid[]` goes as its array
# literal's text (an array of arrays cannot be unnested a row at a time).
_AS_TEXT = {"json": "{}::json", "jsonb": "nullif({}::jsonb, 'null')", "uuid[]": "{}::uuid[]"}


def rows_select(types: Sequence[str]) -> str:
    """`SELECT c0, ... FROM unnest(%b::type0[], ...)`, the rows `row_param(types, ...)` gives."""
    columns, arrays, names = [], [], []
    for i, kind in enumerate(types):
        name = f"c{i}"
        if kind in _AS_TEXT:
            columns.append(_AS_TEXT[kind].format(name))
            arrays.append("%b::text[]")
        elif kind in pgarray.COLUMN_ENCODERS:
            columns.append(name)
            arrays.append(f"%b::{kind}[]")
        else:  # (at import: each statement's rows are selected when its module loads)
            raise ValueError(f"no binary array encoder for a {kind} column")
        names.append(name)
    return (
        f"SELECT {', '.join(columns)} "
        f"FROM unnest({', '.join(arrays)}) AS fold_rows({', '.join(names)})"
    )


def row_param(types: Sequence[str], columns: Sequence[Sequence[Any]]) -> tuple[Any, ...]:
    """The parameters of `rows_select(types)` for rows given column by column.

    json, jsonb and uuid[] columns hold text (or None): JSON, or an array literal. The
    cursor (or its connection) needs `metastore.pgarray.register`.
    """
    # (unnest pads a shorter array with NULLs: a row lost in Python must fail here)
    if len(types) != len(columns) or len({len(column) for column in columns}) > 1:
        lengths = sorted({len(column) for column in columns})
        raise ValueError(f"{len(columns)} columns of {lengths} rows for {len(types)} types")
    return tuple(
        pgarray.column_array("text" if kind in _AS_TEXT else kind, column)
        for kind, column in zip(types, columns, strict=True)
    )


def columns_of(rows: Mapping[Any, Sequence[Any]]) -> list[Sequence[Any]]:
    """The columns of rows keyed by tuples, for `row_param`: the key's items, then the value's.

    Transposed with zip: a column built by looking every row up again by its key hashed the
    key once per column, each uuid in it through Python-level `UUID.__hash__` (71 calls an
    event over a fold).
    """
    return [*zip(*rows, strict=True), *zip(*rows.values(), strict=True)] if rows else []


# A field pair of a `columnLineage` facet: (out_field, in_namespace, in_name, in_field,
# transformations as JSON text).
ColumnEdge = tuple[str, str, str, str, str]


class ColumnReport(msgspec.Struct, frozen=True):
    """An output's `columnLineage` facet as the column_lineage fold stores it: once per
    distinct facet (column_reports), referred to by its key from each output and run."""

    key: bytes  # a 128-bit BLAKE2b of the facet's bytes as sent
    pairs: str  # JSON array of [out_field, in_namespace, in_name, in_field, transformations]
    inputs: list[tuple[str, str]]  # the input names its pairs read, once each


class CatalogLink(msgspec.Struct, frozen=True):
    """The metastore's name of a dataset an engine names in one of its catalogs, by a rule
    (a catalog map entry, or the dataset's `catalog` facet), and why, for each of the two
    names (a JSON object: see the `joined_by` column of sql/projections/datasets.sql)."""

    namespace: str
    name: str
    engine_joined_by: str  # the engine's (emitted) name is in the dataset by this rule
    metastore_joined_by: str  # the metastore's name is (unless known otherwise)


class DatasetRef(msgspec.Struct, frozen=True):
    """A dataset an event names: where (input, output, the dataset of a DatasetEvent)."""

    role: str  # "input" | "output" | "dataset"
    namespace: str
    name: str
    facets: Facets | None
    symlinks: list[tuple[str, str, str | None]] = []  # its other names, from `symlinks`
    # The `schema` facet's fields as JSON text (a batch of decoded field lists held twice
    # the batch's memory) and their hash (None: no schema, deleted or malformed).
    schema_fields: str | None = None
    schema_hash: bytes | None = None
    # The `columnLineage` facet, of an output (or a DatasetEvent's dataset); None when it
    # has no well-formed pair, or is deferred.
    column_report: ColumnReport | None = None
    # Its name in the metastore behind the engine's catalog, when a catalog rule says so.
    catalog: CatalogLink | None = None
    # The `lifecycleStateChange` facet's state (CREATE, DROP, ...), of an output.
    lifecycle: str | None = None
    # Its `columnLineage` facet is too large to be worked out on reading: the folds make
    # its report where it is folded (decode.report_of), and column_report is None.
    deferred_lineage: bool = False


# Stored facets (`facets::text` of a read-model row) back to name -> raw JSON.
FACETS_DECODER = msgspec.json.Decoder(Facets)
