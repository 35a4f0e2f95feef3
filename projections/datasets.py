"""Projection `datasets`: datasets with a stable id, the names that point at them, schemas.

The name an event uses and each identifier of its `symlinks` facet are names of one
dataset. A name seen for the first time joins the dataset of the other names it comes
with, or starts a new dataset (id = uuid5 of that name). When an event ties names of two
datasets together, they merge: the dataset first seen in the log survives (so a replay of
the same log picks the same id), its names and schema versions absorb the other's, and
the other keeps its row with `merged_into` set.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from projections.common import (
    FACETS_DECODER,
    DatasetRef,
    FoldEvent,
    dataset_id,
    facet,
    fields_hash,
    json_text,
    malformed,
    merge_facets,
    row_param,
    rows_select,
)

NAME = "datasets"
VERSION = 1
TABLES = ("datasets", "dataset_names", "dataset_versions")

DATASET_COLUMNS = (
    "id",
    "namespace",
    "name",
    "facets",
    "facet_times",
    "current_fields",
    "first_seen",
    "last_seen",
    "merged_into",
    "first_tx",
    "first_seq",
)
DATASET_TYPES = (
    "uuid",
    "text",
    "text",
    "jsonb",
    "jsonb",
    "jsonb",
    "timestamptz",
    "timestamptz",
    "uuid",
    "bigint",
    "bigint",
)
NAME_COLUMNS = ("namespace", "name", "dataset_id", "kind", "symlink_type", "first_seen")
NAME_TYPES = ("text", "text", "uuid", "text", "text", "timestamptz")
VERSION_COLUMNS = (
    "dataset_id",
    "event_time",
    "seq",
    "fields_hash",
    "fields",
    "run_id",
    "job_id",
    "last_event_time",
    "last_seq",
)
VERSION_TYPES = (
    "uuid",
    "timestamptz",
    "bigint",
    "bytea",
    "jsonb",
    "uuid",
    "uuid",
    "timestamptz",
    "bigint",
)

SELECT_NAMES = f"""
SELECT {", ".join("n." + c for c in NAME_COLUMNS)}
FROM dataset_names n JOIN unnest(%s::text[], %s::text[]) AS k(namespace, name)
  ON n.namespace = k.namespace AND n.name = k.name
"""
# facets as text: decoded to name -> raw JSON, never to Python objects (see common.Facets)
SELECT_DATASETS = (
    "SELECT "
    f"{', '.join('facets::text AS facets' if c == 'facets' else c for c in DATASET_COLUMNS)} "
    "FROM datasets WHERE id = ANY(%s)"
)
SELECT_VERSIONS = (
    f"SELECT {', '.join(VERSION_COLUMNS)} FROM dataset_versions WHERE dataset_id = ANY(%s)"
)


def _upsert(table: str, columns: tuple[str, ...], types: tuple[str, ...], key: str) -> str:
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key.split(", "))
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) "
        f"{rows_select(types)} "
        f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    )


UPSERT_DATASETS = _upsert("datasets", DATASET_COLUMNS, DATASET_TYPES, "id")
UPSERT_NAMES = _upsert("dataset_names", NAME_COLUMNS, NAME_TYPES, "namespace, name")
INSERT_VERSIONS = (
    f"INSERT INTO dataset_versions ({', '.join(VERSION_COLUMNS)}) {rows_select(VERSION_TYPES)}"
)
DELETE_VERSIONS = "DELETE FROM dataset_versions WHERE dataset_id = ANY(%s)"
# Names (and earlier absorbed datasets) not in this batch follow a merged dataset.
REPOINT_NAMES = """
UPDATE dataset_names SET dataset_id = m.survivor
FROM unnest(%s::uuid[], %s::uuid[]) AS m(loser, survivor) WHERE dataset_id = m.loser
"""
REPOINT_MERGED = """
UPDATE datasets SET merged_into = m.survivor
FROM unnest(%s::uuid[], %s::uuid[]) AS m(loser, survivor) WHERE merged_into = m.loser
"""

NameKey = tuple[str, str]


class Fold:
    """The rows one batch touches, loaded once, changed in memory, written back once."""

    def __init__(self, cur: psycopg.Cursor[Any], keys: set[NameKey]) -> None:
        self.cur = cur
        with cur.connection.cursor(row_factory=dict_row) as dcur:
            dcur.execute(SELECT_NAMES, ([k[0] for k in keys], [k[1] for k in keys]))
            self.names: dict[NameKey, dict[str, Any]] = {
                (r["namespace"], r["name"]): r for r in dcur.fetchall()
            }
            ids = list({r["dataset_id"] for r in self.names.values()})
            dcur.execute(SELECT_DATASETS, (ids,))
            self.datasets: dict[uuid.UUID, dict[str, Any]] = {
                r["id"]: {**r, "facets": FACETS_DECODER.decode(r["facets"])}
                for r in dcur.fetchall()
            }
            dcur.execute(SELECT_VERSIONS, (ids,))
            self.versions: dict[uuid.UUID, dict[bytes, dict[str, Any]]] = {}
            for v in dcur.fetchall():
                v["fields_hash"] = bytes(v["fields_hash"])
                self.versions.setdefault(v["dataset_id"], {})[v["fields_hash"]] = v
        self.changed_names: set[NameKey] = set()
        self.changed_datasets: set[uuid.UUID] = set()
        self.changed_versions: set[uuid.UUID] = set()
        self.merged: dict[uuid.UUID, uuid.UUID] = {}  # loser -> survivor

    def fold_ref(self, event: FoldEvent, ref: DatasetRef) -> None:
        when = event.event_time
        names: list[tuple[str, str, str, str | None]] = [(ref.namespace, ref.name, "emitted", None)]
        names += [(ns, n, "symlink", kind) for ns, n, kind in ref.symlinks]
        ids = []
        for ns, n, _, _ in names:
            known = self.names.get((ns, n))
            if known is not None and known["dataset_id"] not in ids:
                ids.append(known["dataset_id"])
        if not ids:
            did = dataset_id(ref.namespace, ref.name)
            self.datasets[did] = {
                "id": did,
                "namespace": ref.namespace,
                "name": ref.name,
                "facets": {},
                "facet_times": {},
                "current_fields": None,
                "first_seen": when,
                "last_seen": when,
                "merged_into": None,
                "first_tx": event.position.tx,
                "first_seq": event.seq,
            }
        else:
            did = min(
                ids, key=lambda i: (self.datasets[i]["first_tx"], self.datasets[i]["first_seq"])
            )
            for loser in ids:
                if loser != did:
                    self.merge(loser, did)
        for ns, n, kind, symlink_type in names:
            self.name(ns, n, did, kind, symlink_type, when)
        dataset = self.datasets[did]
        dataset["first_seen"] = min(dataset["first_seen"], when)
        dataset["last_seen"] = max(dataset["last_seen"], when)
        merge_facets(dataset["facets"], dataset["facet_times"], ref.facets, event.order)
        self.changed_datasets.add(did)
        self.observe_schema(did, event, ref)

    def name(
        self,
        ns: str,
        n: str,
        did: uuid.UUID,
        kind: str,
        symlink_type: str | None,
        when: dt.datetime,
    ) -> None:
        row = self.names.get((ns, n))
        if row is None:
            self.names[(ns, n)] = {
                "namespace": ns,
                "name": n,
                "dataset_id": did,
                "kind": kind,
                "symlink_type": symlink_type,
                "first_seen": when,
            }
            self.changed_names.add((ns, n))
            return
        before = dict(row)
        row["dataset_id"] = did
        if kind == "emitted":
            row["kind"] = "emitted"
        row["symlink_type"] = row["symlink_type"] or symlink_type
        row["first_seen"] = min(row["first_seen"], when)
        if row != before:
            self.changed_names.add((ns, n))

    def observe_schema(self, did: uuid.UUID, event: FoldEvent, ref: DatasetRef) -> None:
        schema = facet(ref.facets, "schema")
        if schema is None or schema.get("_deleted") is True:
            return
        fields = schema.get("fields")
        if not isinstance(fields, list):
            malformed("schema")
            return
        key = fields_hash(fields)
        versions = self.versions.setdefault(did, {})
        when, seq = event.event_time, event.seq
        produced_by = ref.role == "output" and event.kind == "run"
        run_id = event.run_id if produced_by else None
        jid = event.job_id if produced_by else None
        version = versions.get(key)
        if version is None:
            versions[key] = {
                "dataset_id": did,
                "event_time": when,
                "seq": seq,
                "fields_hash": key,
                "fields": fields,
                "run_id": run_id,
                "job_id": jid,
                "last_event_time": when,
                "last_seq": seq,
            }
        else:
            if (when, seq) < (version["event_time"], version["seq"]):
                version.update(event_time=when, seq=seq, run_id=run_id, job_id=jid)
            if (when, seq) > (version["last_event_time"], version["last_seq"]):
                version.update(last_event_time=when, last_seq=seq)
        self.changed_versions.add(did)

    def merge(self, loser: uuid.UUID, survivor: uuid.UUID) -> None:
        gone, kept = self.datasets[loser], self.datasets[survivor]
        for name, order in gone["facet_times"].items():
            previous = kept["facet_times"].get(name)
            if previous is None or order > previous:
                kept["facet_times"][name] = order
                if name in gone["facets"]:
                    kept["facets"][name] = gone["facets"][name]
                else:
                    kept["facets"].pop(name, None)
        kept["first_seen"] = min(kept["first_seen"], gone["first_seen"])
        kept["last_seen"] = max(kept["last_seen"], gone["last_seen"])
        gone["merged_into"] = survivor
        gone["current_fields"] = None  # its schemas are the survivor's now
        gone_versions = self.versions.pop(loser, {})
        kept_versions = self.versions.setdefault(survivor, {})
        for key, version in gone_versions.items():
            version["dataset_id"] = survivor
            mine = kept_versions.get(key)
            if mine is None:
                kept_versions[key] = version
                continue
            if (version["event_time"], version["seq"]) < (mine["event_time"], mine["seq"]):
                mine.update(
                    event_time=version["event_time"],
                    seq=version["seq"],
                    run_id=version["run_id"],
                    job_id=version["job_id"],
                )
            if (version["last_event_time"], version["last_seq"]) > (
                mine["last_event_time"],
                mine["last_seq"],
            ):
                mine.update(
                    last_event_time=version["last_event_time"], last_seq=version["last_seq"]
                )
        for name_key, row in self.names.items():
            if row["dataset_id"] == loser:
                row["dataset_id"] = survivor
                self.changed_names.add(name_key)
        for earlier, to in self.merged.items():
            if to == loser:
                self.merged[earlier] = survivor
        self.merged[loser] = survivor
        self.changed_datasets.update((loser, survivor))
        self.changed_versions.update((loser, survivor))

    def write(self) -> None:
        cur = self.cur
        if self.merged:
            losers, survivors = list(self.merged), list(self.merged.values())
            cur.execute(REPOINT_NAMES, (losers, survivors))
            cur.execute(REPOINT_MERGED, (losers, survivors))
        if self.changed_names:
            rows = [self.names[k] for k in sorted(self.changed_names)]
            cur.execute(
                UPSERT_NAMES, row_param(NAME_TYPES, [[r[c] for r in rows] for c in NAME_COLUMNS])
            )
        for did in self.changed_versions:
            dataset = self.datasets[did]
            versions = self.versions.get(did)
            if versions and dataset["merged_into"] is None:
                current = max(
                    versions.values(), key=lambda v: (v["last_event_time"], v["last_seq"])
                )
                dataset["current_fields"] = current["fields"]
        if self.changed_datasets:
            rows = [self.datasets[d] for d in self.changed_datasets]
            columns = [
                [None if r[c] is None else json_text(r[c]) for r in rows]
                if c in ("facets", "facet_times", "current_fields")
                else [r[c] for r in rows]
                for c in DATASET_COLUMNS
            ]
            cur.execute(UPSERT_DATASETS, row_param(DATASET_TYPES, columns))
        if self.changed_versions:
            cur.execute(DELETE_VERSIONS, (list(self.changed_versions),))
            rows = [v for did in self.changed_versions for v in self.versions.get(did, {}).values()]
            if rows:
                cur.execute(
                    INSERT_VERSIONS,
                    row_param(
                        VERSION_TYPES,
                        [
                            [json_text(r[c]) for r in rows]
                            if c == "fields"
                            else [r[c] for r in rows]
                            for c in VERSION_COLUMNS
                        ],
                    ),
                )


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    refs = [(event, ref) for event in events for ref in event.refs]
    if not refs:
        return
    keys: set[NameKey] = set()
    for _, ref in refs:
        keys.add((ref.namespace, ref.name))
        keys.update((ns, n) for ns, n, _ in ref.symlinks)
    state = Fold(cur, keys)
    for event, ref in refs:
        state.fold_ref(event, ref)
    state.write()
