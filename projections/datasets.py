"""Projection `datasets`: datasets with a stable id, the names that point at them, schemas.

The name an event uses, each identifier of its `symlinks` facet, and its metastore's name
by a catalog rule (a catalog map entry or its `catalog` facet: see decode.catalog_link)
are names of one dataset. A name seen for the first time joins the dataset of the other
names it comes with, or starts a new dataset (id = uuid5 of that name). When an event ties
names of two datasets together, they merge: the dataset first seen in the log survives
(so a replay of the same log picks the same id), its names and schema versions absorb the
other's, and the other keeps its row with `merged_into` set. So a dataset's id is the id
of its name seen first in the log, whatever joined the others to it: a map change that
splits it again (a rebuild) gives each part the id of its own first name, the id it had
before the join. A name first used by an event that joins a dataset known by another name
gets a row for its own id too, `merged_into` that dataset: its id answers as the dataset.

Facets and schemas describe the data as written: an output of a run event that does not
write it (a START, a FAIL: the run only attempted it; see FoldEvent.writes) gives the
dataset its names but no facets and no schema version; nor does a write of a run that ends
FAIL or ABORT, whatever batch its end comes in (dataset_writes settles the versions). Another
job's events reusing a runId give nothing (common.FIRST_JOB_OF_RUNS).

A dataset's display name (its `namespace` and `name` columns) is its most table-like
name: the least `display_key` of its names, a symlink identifier of type TABLE or a
metastore's name a catalog rule derived before a name an event used, before any other;
then the first seen. Its home (`home_namespace`, `home_name`: the one namespace it counts
in) is the least key among the names an event used (kind `emitted` or `symlink`): the
display name unless only a catalog rule derived that. A name's key only ever falls (a name
gains a symlink type, a rule or an event, its first_seen moves earlier), so the least keys
are the same whatever order the events come in.

A name's kind says where it comes from: `emitted` when an event used it, else `symlink`
when a symlinks facet named it, else `catalog` (only a rule derived it); `joined_by`, the
rule that joined it, is independent of the kind.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg

from metastore.pgarray import bytea_array, text_array, uuid_array
from projections import dataset_writes
from projections.common import (
    FACETS_CHANGED,
    FACETS_DECODER,
    INDEX_PROBES_ONLY,
    NO_RUN,
    DatasetRef,
    FoldEvent,
    RunFacts,
    dataset_id,
    ended_failed,
    json_text,
    loading_cursor,
    merge_facets,
    micros,
    of_another_job,
    planner_without,
    row_param,
    rows_select,
    run_facts,
)

NAME = "datasets"
# 2: facets json; 3: names joined by catalog rules; 4: display name by display_key;
# 5: a name an event used is `emitted` whatever joined it, and each dataset's home name;
# 6: no catalog name that no index holds (a metadataUri of kilobytes);
# 7: an output a run only attempted (a START, a FAIL) makes no version and merges no facets
# 8: names by trigram (/search)
# 9: no current_fields (readers take the version last seen from dataset_versions)
# 10: a reader's schema is no version (nor the schema facet); versions hashed with
# engine-neutral types (metastore.schema_types)
# 11: a dataset counts in every namespace it has a name in: names by (namespace, dataset)
# 12: a run that ends FAIL or ABORT makes no version whatever the batches
# (version_sightings); another job's events reusing a runId are left out
# 13: the current schema's fields in dataset_fields (/search by field)
# 14: described fields by name (/search's page of a word in descriptions)
# 15: the live datasets by display name (/datasets' unfiltered pages)
VERSION = 15
TABLES = ("datasets", "dataset_names", "dataset_versions", "version_sightings", "dataset_fields")

DATASET_COLUMNS = (
    "id",
    "namespace",
    "name",
    "facets",
    "facet_times",
    "first_seen",
    "last_seen",
    "merged_into",
    "first_tx",
    "first_seq",
    "display_key",
    "home_namespace",
    "home_name",
    "home_key",
)
DATASET_TYPES = (
    "uuid",
    "text",
    "text",
    "json",
    "jsonb",
    "timestamptz",
    "timestamptz",
    "uuid",
    "bigint",
    "bigint",
    "jsonb",
    "text",
    "text",
    "jsonb",
)
NAME_COLUMNS = (
    "namespace",
    "name",
    "dataset_id",
    "kind",
    "symlink_type",
    "first_seen",
    "joined_by",
)
NAME_TYPES = ("text", "text", "uuid", "text", "text", "timestamptz", "json")
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

# Each of `k`'s names by the primary key, whatever the statistics: a range from the key,
# one row, then equal (with a fresh store's the planner hashed every name, or probed
# dataset_names_namespace_dataset by namespace and filtered: both grow with the store).
NAME_PROBE = """CROSS JOIN LATERAL (
    SELECT n.* FROM dataset_names n WHERE (n.namespace, n.name) >= (k.namespace, k.name)
    ORDER BY n.namespace, n.name LIMIT 1) n"""
NAME_FOUND = "(n.namespace, n.name) = (k.namespace, k.name)"
SELECT_NAMES = f"""
SELECT {", ".join(f"n.{c}::text AS {c}" if c == "joined_by" else "n." + c for c in NAME_COLUMNS)}
FROM unnest(%b::text[], %b::text[]) AS k(namespace, name)
{NAME_PROBE}
WHERE {NAME_FOUND}
"""
# JSON as text: facets are decoded to name -> raw JSON, never to Python objects (see
# common.Facets); schema fields are only ever compared by hash and written back.
TEXT_COLUMNS = frozenset({"facets", "fields"})


def _select_list(columns: tuple[str, ...]) -> str:
    return ", ".join(f"{c}::text AS {c}" if c in TEXT_COLUMNS else c for c in columns)


# The datasets the batch's names point to now. Found through the names by the server, not
# by ids the names' answer gave: the three loads go in one round trip (Fold.__init__). The
# names' ids come first (fenced by OFFSET 0) and each row is probed by its key: as `id IN
# (the names' ids)`, with statistics from when the table was nearly empty the planner put
# the whole table outside and probed every name for each of its rows (a store of 700
# datasets: 110,000 buffers and 210 ms a batch of 50 events).
SELECT_DATASETS = f"""
SELECT {_select_list(DATASET_COLUMNS)}
FROM (SELECT DISTINCT n.dataset_id AS found
      FROM unnest(%b::text[], %b::text[]) AS k(namespace, name)
      {NAME_PROBE}
      WHERE {NAME_FOUND} OFFSET 0) AS x
CROSS JOIN LATERAL (SELECT * FROM datasets d WHERE d.id = x.found OFFSET 0) AS datasets
"""
# The versions a batch can change: those with a hash its schemas have, of the datasets a
# ref's names point to now (several: a merge, which loads them all). Not every version: a
# dataset whose schema keeps changing has one per schema it ever had, and loading (and
# rewriting) them all made each batch that touches it cost more as the log grew. (The
# current schema is the version last seen: readers take it from dataset_versions.)
SELECT_VERSIONS = f"""
SELECT {_select_list(VERSION_COLUMNS)}
FROM (SELECT DISTINCT n.dataset_id AS found, k.hash AS found_hash
      FROM unnest(%b::text[], %b::text[], %b::bytea[]) AS k(namespace, name, hash)
      {NAME_PROBE}
      WHERE {NAME_FOUND} OFFSET 0) AS x
CROSS JOIN LATERAL (
    SELECT * FROM dataset_versions v
    WHERE v.dataset_id = x.found AND v.fields_hash = x.found_hash OFFSET 0) AS dataset_versions
"""
# Every version of datasets about to merge (their schemas all move to the survivor).
SELECT_ALL_VERSIONS = (
    f"SELECT {_select_list(VERSION_COLUMNS)} FROM dataset_versions "
    "WHERE dataset_id = ANY(%b::uuid[])"
)


def _upsert(
    table: str, columns: tuple[str, ...], types: tuple[str, ...], key: str, keep: str = ""
) -> str:
    """INSERT ... ON CONFLICT (key) DO UPDATE; UNCHANGED for JSON column `keep` keeps it."""
    updates = ", ".join(
        f"{c} = CASE WHEN {t}_typeof(excluded.{c}) = 'object' THEN excluded.{c} "
        f"ELSE {table}.{c} END"
        if c == keep
        else f"{c} = excluded.{c}"
        for c, t in zip(columns, types, strict=True)
        if c not in key.split(", ")
    )
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) "
        f"{rows_select(types)} "
        f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    )


# facets: UNCHANGED when they are (the stored document, often kilobytes, is not rewritten).
# Not NULL: NOT NULL is checked on the row proposed for insertion, before ON CONFLICT;
# facets are always a JSON object, so a number cannot be mistaken for them.
UNCHANGED = "0"
UPSERT_DATASETS = _upsert("datasets", DATASET_COLUMNS, DATASET_TYPES, "id", keep="facets")
UPSERT_NAMES = _upsert("dataset_names", NAME_COLUMNS, NAME_TYPES, "namespace, name")
UPSERT_VERSIONS = _upsert(
    "dataset_versions", VERSION_COLUMNS, VERSION_TYPES, "dataset_id, fields_hash"
)
# The versions of datasets merged into another (which has them now).
DELETE_VERSIONS = "DELETE FROM dataset_versions WHERE dataset_id = ANY(%s)"
# Names (and earlier absorbed datasets) not in this batch follow a merged dataset.
REPOINT_NAMES = """
UPDATE dataset_names SET dataset_id = m.survivor
FROM unnest(%s::uuid[], %s::uuid[]) AS m(loser, survivor) WHERE dataset_id = m.loser
"""
# The current schema's fields (the version last seen) of the datasets whose versions this
# batch wrote, merged or settled (a run's end folded now: the datasets its sightings name),
# rewritten only where they differ from the stored ones: most batches see datasets again
# with the schema they had, and a rewrite of every touched dataset's fields churned their
# trigram indexes. Both sides of the comparison are one sorted array per dataset; each
# run's sightings and each dataset's rows are read by index probes whatever the statistics
# (INDEX_PROBES_ONLY, and the runs as the outer side, fenced by OFFSET 0: on a store
# growing faster than ANALYZE, hash joins scanned version_sightings, dataset_names and
# dataset_fields every batch, and without the fence the planner read all of
# version_sightings' index and compared each sighting with every run of the batch). The
# INSERT does not see the DELETE, which removes only the changed datasets' old rows.
SYNC_FIELDS = """
WITH touched (id) AS (
    SELECT x.id FROM unnest(%(ids)b::uuid[]) AS x(id)
    UNION
    SELECT n.dataset_id FROM unnest(%(runs)b::uuid[]) AS r(run_id)
    CROSS JOIN LATERAL (
        SELECT s.namespace, s.name FROM version_sightings s WHERE s.run_id = r.run_id
        OFFSET 0) s
    CROSS JOIN LATERAL (
        SELECT n.dataset_id FROM dataset_names n
        WHERE n.namespace = s.namespace AND n.name = s.name OFFSET 0) n
),
compared AS (
    SELECT t.id, w.fields AS wanted, h.fields AS had
    FROM touched t
    LEFT JOIN LATERAL (
        SELECT v.fields FROM dataset_versions v WHERE v.dataset_id = t.id
        ORDER BY v.last_event_time DESC, v.last_seq DESC LIMIT 1) c ON true
    CROSS JOIN LATERAL (
        SELECT coalesce(jsonb_agg(jsonb_build_array(x.name, x.description)
                                  ORDER BY x.name, x.description), '[]') AS fields
        FROM (
            SELECT DISTINCT ON (f.value->>'name') f.value->>'name' AS name,
                   nullif(f.value->>'description', '') AS description
            FROM jsonb_array_elements(
                CASE WHEN jsonb_typeof(c.fields) = 'array' THEN c.fields ELSE '[]' END) f
            WHERE jsonb_typeof(f.value->'name') = 'string') x) w
    CROSS JOIN LATERAL (
        SELECT coalesce(jsonb_agg(jsonb_build_array(d.name, d.description)
                                  ORDER BY d.name, d.description), '[]') AS fields
        FROM dataset_fields d WHERE d.dataset_id = t.id) h
),
changed AS (SELECT id, wanted FROM compared WHERE wanted <> had),
gone AS (DELETE FROM dataset_fields f USING changed c WHERE f.dataset_id = c.id)
INSERT INTO dataset_fields (dataset_id, name, description)
SELECT c.id, e.value->>0, e.value->>1 FROM changed c
CROSS JOIN LATERAL jsonb_array_elements(c.wanted) e
"""
REPOINT_MERGED = """
UPDATE datasets SET merged_into = m.survivor
FROM unnest(%s::uuid[], %s::uuid[]) AS m(loser, survivor) WHERE merged_into = m.loser
"""

NameKey = tuple[str, str]
# (namespace, name, kind, symlink type, joined_by): a name as one event gives it.
GivenName = tuple[str, str, str, str | None, str | None]

# Which kind a name keeps when it comes several ways: the name an event used, over a
# symlink, over a metastore's name only a catalog rule derived. joined_by is JSON the fold
# wrote itself (decode.catalog_link), so its role reads as text.
KIND_RANK = {"emitted": 2, "symlink": 1, "catalog": 0}
METASTORE_ROLE = '"role":"metastore"'


def display_key(name: dict[str, Any]) -> list[Any]:
    """How table-like a dataset_names row is, for the display name: least first.

    0: a table's name in its metastore (a symlink of type TABLE, or the metastore's name a
    catalog rule derived); 1: a name an event used (an engine's name a catalog rule joined
    is one); 2: any other.
    """
    if name["symlink_type"] == "TABLE" or METASTORE_ROLE in (name["joined_by"] or ""):
        rank = 0
    elif name["kind"] == "emitted":
        rank = 1
    else:
        rank = 2
    return [rank, micros(name["first_seen"]), name["namespace"], name["name"]]


class Fold:
    """The rows one batch touches, loaded once, changed in memory, written back once."""

    def __init__(
        self,
        cur: psycopg.Cursor[Any],
        keys: set[NameKey],
        schemas: set[tuple[NameKey, bytes]],
        facts: dict[uuid.UUID, RunFacts],
    ) -> None:
        self.cur = cur
        self.facts = facts
        self.sightings: dataset_writes.Sightings = {}
        # The three loads are sent before any answer is read: one round trip, the server
        # working through the datasets and versions while the names are turned into rows
        # here (each waited for the one before: 42 % of the fold was this projection).
        names = text_array([k[0] for k in keys]), text_array([k[1] for k in keys])
        # Each name by its key whatever the statistics: with a fresh store's, the planner
        # read every name (a sequential scan and a hash) three times a batch.
        with (
            planner_without(cur, *INDEX_PROBES_ONLY),
            loading_cursor(cur) as ncur,
            loading_cursor(cur) as dcur,
            loading_cursor(cur) as vcur,
        ):
            ncur.execute(SELECT_NAMES, names)
            dcur.execute(SELECT_DATASETS, names)
            if schemas:
                vcur.execute(
                    SELECT_VERSIONS,
                    (
                        text_array([k[0] for k, _ in schemas]),
                        text_array([k[1] for k, _ in schemas]),
                        bytea_array([h for _, h in schemas]),
                    ),
                )
            # (a dict row's keys are the select list's: joined_by's cast is aliased)
            self.names: dict[NameKey, dict[str, Any]] = {
                (r["namespace"], r["name"]): r for r in ncur.fetchall()
            }
            self.datasets: dict[uuid.UUID, dict[str, Any]] = {
                r["id"]: {**r, "facets": FACETS_DECODER.decode(r["facets"]), "new_facets": False}
                for r in dcur.fetchall()
            }
            self.versions: dict[uuid.UUID, dict[bytes, dict[str, Any]]] = {}
            if schemas:
                self._add_versions(vcur.fetchall())
        self.changed_names: set[NameKey] = set()
        self.changed_datasets: set[uuid.UUID] = set()
        self.changed_version_keys: set[tuple[uuid.UUID, bytes]] = set()
        self.emptied: set[uuid.UUID] = set()  # merged away: their stored versions go
        # Merges this batch made: loser -> the dataset it merged into. The names and rows in
        # memory keep the id they had until `write`; `find` gives the dataset an id is now.
        # (Moving every name of the loser at each merge made a chain of merges quadratic.)
        self.merged: dict[uuid.UUID, uuid.UUID] = {}

    def find(self, did: uuid.UUID) -> uuid.UUID:
        """The dataset `did` is part of now, after this batch's merges."""
        live = did
        while live in self.merged:
            live = self.merged[live]
        while did != live:  # (each id passed points at the survivor from now on)
            self.merged[did], did = live, self.merged[did]
        return live

    def _add_versions(self, rows: list[dict[str, Any]]) -> None:
        """Adds stored versions not loaded yet (one loaded may have changed in memory)."""
        for v in rows:
            v["fields_hash"] = bytes(v["fields_hash"])
            self.versions.setdefault(v["dataset_id"], {}).setdefault(v["fields_hash"], v)

    def merge_versions(self) -> None:
        """Moves the schema versions of the datasets merged away to their survivors, with
        every stored version of both (the load took only those the batch's schemas have),
        once for the whole batch: a version's first and last sightings combine by min and
        max, so the order of the merges does not matter."""
        survivors = {self.find(loser) for loser in self.merged}
        with loading_cursor(self.cur) as dcur:
            dcur.execute(SELECT_ALL_VERSIONS, (uuid_array([*self.merged, *survivors]),))
            for stored in dcur.fetchall():
                stored["fields_hash"] = bytes(stored["fields_hash"])
                versions = self.versions.setdefault(stored["dataset_id"], {})
                mine = versions.setdefault(stored["fields_hash"], stored)
                if mine is not stored:  # (seen in this batch: it may start earlier)
                    _combine(mine, stored)
        for loser in self.merged:
            survivor = self.find(loser)
            kept = self.versions.setdefault(survivor, {})
            for key, version in self.versions.pop(loser, {}).items():
                version["dataset_id"] = survivor
                self.changed_version_keys.add((survivor, key))
                mine = kept.setdefault(key, version)
                if mine is not version:
                    _combine(mine, version)

    def fold_ref(self, event: FoldEvent, ref: DatasetRef) -> None:
        when = event.event_time
        link = ref.catalog
        engine_joined_by = None if link is None else link.engine_joined_by
        names: list[GivenName] = [(ref.namespace, ref.name, "emitted", None, engine_joined_by)]
        names += [(ns, n, "symlink", kind, None) for ns, n, kind in ref.symlinks]
        if link is not None:
            names.append((link.namespace, link.name, "catalog", None, link.metastore_joined_by))
        found: dict[uuid.UUID, None] = {}  # (a set in the order found)
        for ns, n, _, _, _ in names:
            known = self.names.get((ns, n))
            if known is not None:
                found[self.find(known["dataset_id"])] = None
        ids = list(found)
        if not ids:
            did = dataset_id(ref.namespace, ref.name)
            self.datasets[did] = self.new_dataset(did, ref, event)
        elif len(ids) == 1:
            did = ids[0]
        else:
            did = min(
                ids, key=lambda i: (self.datasets[i]["first_tx"], self.datasets[i]["first_seq"])
            )
            for loser in ids:
                if loser != did:
                    self.merge(loser, did)
        if ids and (ref.namespace, ref.name) not in self.names:
            # A name first used by an event, of a dataset known by another name: the id
            # it would have started a dataset with answers as that dataset (as an id
            # absorbed by a merge does), so an id handed out while a catalog map did not
            # join the two stays valid once one does (and after a replay).
            alias = dataset_id(ref.namespace, ref.name)
            if alias != did:
                self.datasets[alias] = self.new_dataset(alias, ref, event, merged_into=did)
                self.changed_datasets.add(alias)
        for ns, n, kind, symlink_type, joined_by in names:
            self.name(ns, n, did, kind, symlink_type, joined_by, when)
        dataset = self.datasets[did]
        dataset["first_seen"] = min(dataset["first_seen"], when)
        dataset["last_seen"] = max(dataset["last_seen"], when)
        self.changed_datasets.add(did)
        if event.versions(ref) and ref.schema_hash is not None:
            self.sight(event, ref)
        if not event.observes(ref):
            return  # an attempted output: its names, but no facets and no version
        facets = ref.facets
        if not event.versions(ref) and facets and "schema" in facets:
            facets = {k: v for k, v in facets.items() if k != "schema"}  # a reader's view
        if merge_facets(dataset["facets"], dataset["facet_times"], facets, event.order) & (
            FACETS_CHANGED
        ):
            dataset["new_facets"] = True
        # (a run that ended FAIL or ABORT makes no version; its facets merged, as they may
        # have been before its end was logged: facets keep no history to settle from)
        if event.versions(ref) and not ended_failed(event, self.facts):
            self.observe_schema(did, event, ref)

    @staticmethod
    def new_dataset(
        did: uuid.UUID, ref: DatasetRef, event: FoldEvent, merged_into: uuid.UUID | None = None
    ) -> dict[str, Any]:
        when = event.event_time
        return {
            "id": did,
            "namespace": ref.namespace,
            "name": ref.name,
            "facets": {},
            "facet_times": {},
            "new_facets": True,  # not a column: whether `facets` is to be written
            "first_seen": when,
            "last_seen": when,
            "merged_into": merged_into,
            "first_tx": event.position.tx,
            "first_seq": event.seq,
            "display_key": None,
            "home_namespace": None,
            "home_name": None,
            "home_key": None,
        }

    def name(
        self,
        ns: str,
        n: str,
        did: uuid.UUID,
        kind: str,
        symlink_type: str | None,
        joined_by: str | None,
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
                "joined_by": joined_by,
            }
            self.changed_names.add((ns, n))
            self.display(did, self.names[(ns, n)])
            return
        symlink = row["symlink_type"] or symlink_type
        # The kind ranked highest; the rule that joined it, if any did: among several, the
        # earliest event's.
        takes_kind = KIND_RANK[kind] > KIND_RANK[row["kind"]]
        takes_rule = (
            joined_by is not None
            and joined_by != row["joined_by"]
            and (row["joined_by"] is None or when < row["first_seen"])
        )
        if (
            self.find(row["dataset_id"]) != did
            or takes_kind
            or takes_rule
            or symlink != row["symlink_type"]
            or when < row["first_seen"]
        ):
            row["dataset_id"] = did
            if takes_kind:
                row["kind"] = kind
            if takes_rule:
                row["joined_by"] = joined_by
            row["symlink_type"] = symlink
            row["first_seen"] = min(row["first_seen"], when)
            self.changed_names.add((ns, n))
            self.display(did, row)

    def display(self, did: uuid.UUID, name: dict[str, Any]) -> None:
        """Makes `name` the display name of dataset `did` if it is the more table-like, and
        its home if it is that among the names an event used."""
        dataset = self.datasets[did]
        key = display_key(name)
        if dataset["display_key"] is None or key < dataset["display_key"]:
            dataset["display_key"] = key
            dataset["namespace"], dataset["name"] = name["namespace"], name["name"]
            self.changed_datasets.add(did)
        if name["kind"] != "catalog" and (dataset["home_key"] is None or key < dataset["home_key"]):
            dataset["home_key"] = key
            dataset["home_namespace"], dataset["home_name"] = name["namespace"], name["name"]
            self.changed_datasets.add(did)

    def sight(self, event: FoldEvent, ref: DatasetRef) -> None:
        """Keeps the sighting of `ref`'s schema by `event`'s run (dataset_writes)."""
        assert ref.schema_hash is not None
        produced_by = ref.role == "output" and event.kind == "run" and event.run_id is not None
        run = event.run_id if produced_by else NO_RUN
        key = (ref.namespace, ref.name, ref.schema_hash, run)
        when, seq = event.event_time, event.seq
        row = self.sightings.get(key)
        if row is None:
            job = event.job_id if produced_by else None
            failed = ended_failed(event, self.facts)
            self.sightings[key] = [job, when, seq, when, seq, failed]
            return
        if (when, seq) < (row[1], row[2]):
            row[1], row[2] = when, seq
        if (when, seq) > (row[3], row[4]):
            row[3], row[4] = when, seq

    def observe_schema(self, did: uuid.UUID, event: FoldEvent, ref: DatasetRef) -> None:
        fields, key = ref.schema_fields, ref.schema_hash
        if fields is None or key is None:
            return
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
                # (one schema in other spellings, `long` or `bigint`: the first one's)
                version.update(event_time=when, seq=seq, run_id=run_id, job_id=jid, fields=fields)
            if (when, seq) > (version["last_event_time"], version["last_seq"]):
                version.update(last_event_time=when, last_seq=seq)
        self.changed_version_keys.add((did, key))

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
                kept["new_facets"] = True
        kept["first_seen"] = min(kept["first_seen"], gone["first_seen"])
        kept["last_seen"] = max(kept["last_seen"], gone["last_seen"])
        if gone["display_key"] is not None and (
            kept["display_key"] is None or gone["display_key"] < kept["display_key"]
        ):
            kept["display_key"] = gone["display_key"]
            kept["namespace"], kept["name"] = gone["namespace"], gone["name"]
        if gone["home_key"] is not None and (
            kept["home_key"] is None or gone["home_key"] < kept["home_key"]
        ):
            kept["home_key"] = gone["home_key"]
            kept["home_namespace"], kept["home_name"] = gone["home_namespace"], gone["home_name"]
        gone["merged_into"] = survivor
        self.emptied.add(loser)
        # (its names, its versions and the rows pointing at it follow in `write`)
        self.merged[loser] = survivor
        self.changed_datasets.update((loser, survivor))

    def follow_merges(self) -> None:
        """Points the names and rows in memory at the datasets their ids are part of now,
        and moves the versions of the datasets merged away (once for the batch)."""
        for key, row in self.names.items():
            live = self.find(row["dataset_id"])
            if live != row["dataset_id"]:
                row["dataset_id"] = live
                self.changed_names.add(key)
        # (rows absorbed into a loser before, or made aliases of it: written after
        # REPOINT_MERGED, they would point at the loser again)
        for did, row in self.datasets.items():
            into = row["merged_into"]
            if into is not None and self.find(into) != into:
                row["merged_into"] = self.find(into)
                self.changed_datasets.add(did)
        self.merge_versions()

    def write(self) -> None:
        cur = self.cur
        if self.merged:
            self.follow_merges()
            losers = list(self.merged)
            survivors = [self.find(loser) for loser in losers]
            with planner_without(cur, *INDEX_PROBES_ONLY):
                cur.execute(REPOINT_NAMES, (losers, survivors))
                cur.execute(REPOINT_MERGED, (losers, survivors))
        if self.changed_names:
            rows = [self.names[k] for k in sorted(self.changed_names)]
            cur.execute(
                UPSERT_NAMES, row_param(NAME_TYPES, [[r[c] for r in rows] for c in NAME_COLUMNS])
            )
        if self.changed_datasets:
            rows = [self.datasets[d] for d in self.changed_datasets]
            columns = [
                [json_text(r[c]) if r["new_facets"] else UNCHANGED for r in rows]
                if c == "facets"
                else [json_text(r[c]) for r in rows]
                if c in ("facet_times", "display_key", "home_key")
                else [r[c] for r in rows]
                for c in DATASET_COLUMNS
            ]
            cur.execute(UPSERT_DATASETS, row_param(DATASET_TYPES, columns))
        if self.emptied:
            cur.execute(DELETE_VERSIONS, (list(self.emptied),))
        if self.changed_version_keys:
            # (a version moved on by a later merge in this batch is under its survivor now)
            rows = [
                self.versions[did][key]
                for did, key in self.changed_version_keys
                if did in self.versions and key in self.versions[did]
            ]
            if rows:
                cur.execute(
                    UPSERT_VERSIONS,
                    row_param(
                        VERSION_TYPES,
                        [[r[c] for r in rows] for c in VERSION_COLUMNS],  # fields: JSON text
                    ),
                )
        ends = {run: facts.failed for run, facts in self.facts.items()}
        dataset_writes.write(cur, self.sightings, ends)
        self.write_fields(list(ends))

    def write_fields(self, runs: list[Any]) -> None:
        """Rewrites dataset_fields for the datasets whose current schema may have changed."""
        ids = {did for did, _ in self.changed_version_keys} | self.emptied
        ids |= {self.find(loser) for loser in self.merged}
        if not ids and not runs:
            return
        # (nothing fetched: the fold's pipeline does not wait)
        params = {"ids": uuid_array(ids), "runs": uuid_array(runs)}
        with planner_without(self.cur, *INDEX_PROBES_ONLY):
            self.cur.execute(SYNC_FIELDS, params)


def _combine(version: dict[str, Any], other: dict[str, Any]) -> None:
    """Makes `version` (of a schema) span `other` too: the earlier first sighting (with its
    run and job), the later last one."""
    if (other["event_time"], other["seq"]) < (version["event_time"], version["seq"]):
        version.update(
            event_time=other["event_time"],
            seq=other["seq"],
            run_id=other["run_id"],
            job_id=other["job_id"],
            fields=other["fields"],
        )
    if (other["last_event_time"], other["last_seq"]) > (
        version["last_event_time"],
        version["last_seq"],
    ):
        version.update(last_event_time=other["last_event_time"], last_seq=other["last_seq"])


def load(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> Fold | None:
    """The stored names, datasets and versions the batch touches (see fold.fold_pipelined)."""
    keys: set[NameKey] = set()
    schemas: set[tuple[NameKey, bytes]] = set()  # (name, schema hash) of each ref's names
    facts = run_facts(cur, events)
    for event in events:
        if of_another_job(event, facts):
            continue
        for ref in event.refs:
            names = [(ref.namespace, ref.name), *((ns, n) for ns, n, _ in ref.symlinks)]
            if ref.catalog is not None:
                names.append((ref.catalog.namespace, ref.catalog.name))
            keys.update(names)
            if ref.schema_hash is not None and event.versions(ref):
                schemas.update((k, ref.schema_hash) for k in names)
    return Fold(cur, keys, schemas, facts) if keys or facts else None


def apply(cur: psycopg.Cursor[Any], events: list[FoldEvent], state: Fold | None) -> None:
    """Folds the batch's dataset references into the loaded state and writes it back."""
    if state is None:
        return
    for event in events:
        if of_another_job(event, state.facts):
            continue  # not that run's: none of what it names (common.FIRST_JOB_OF_RUNS)
        for ref in event.refs:
            state.fold_ref(event, ref)
    state.write()


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    apply(cur, events, load(cur, events))
