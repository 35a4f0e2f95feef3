"""What a dataset shows as a graph node, now or as of a moment, for all datasets of a graph
in one statement: its display name and name count, type, owners, lifecycle state, and
its freshness.

Freshness: its last successful write, the latest failed attempt after it, and why it is
stale: a writer's latest run failed after that write, a dataset the writing run read
(one hop) was successfully written after it, or a dataset upstream (any hops, through the
inputs of each one's latest write: UPSTREAM, `spread`) is stale because its writer failed. Now,
from the job edges (the projection keeps each edge's latest write and failed attempt:
projections/lineage.py); as of T, from the run edges and runs by then, and the names
first seen by then (asof.py).

One statement, set-based: each dataset's names and output edges are read once for all it
shows (the graph read them per node for the name count, the lifecycle and the display
name, and again for the freshness), a writer or input several datasets share is looked up
once, and the walk upstream reads a hop's datasets together. A list of datasets reads the
freshness alone (`freshness_of`) the same way, one statement a page.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection
from typing import Any

import msgspec
from psycopg import AsyncConnection

from metastore.access import EVERYTHING, Access
from metastore.api import asof, lateness, limits, models, visibility
from metastore.api.db import rows
from metastore.api.sqlparts import dataset_type, lifecycle, lifecycle_now, owners

# The names of the datasets in array `{datasets}`: all now, those first seen by T as of T.
NAMES = """
SELECT n.dataset_id, n.namespace, n.name, n.kind, n.symlink_type, n.joined_by, n.first_seen
FROM readmodel.dataset_names n
WHERE n.dataset_id = ANY({datasets}){seen}"""
# Rows (dataset_id, job_id, write_at, run_id, attempt_at, attempt_run, attempt_state,
# lifecycle_state, lifecycle_time) of their output edges: now a job edge (its latest write
# and failed attempt); as of T a run edge (its write by T: a run whose writes span T
# counts from its first, see run_edges.first_write_at; its run's failure by T), and a
# static one declared by then.
OUTS_NOW = """
SELECT n.dataset_id, e.job_id, e.last_write_at AS write_at, e.last_write_run AS run_id,
       e.attempt_at, e.attempt_run, e.attempt_state, e.lifecycle_state, e.lifecycle_time
FROM names n
JOIN readmodel.job_edges e
  ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'"""
OUTS_AS_OF = """
SELECT n.dataset_id, re.job_id,
       CASE WHEN re.last_write_at <= %(as_of)s THEN re.last_write_at
            WHEN re.first_write_at <= %(as_of)s THEN re.first_write_at END AS write_at,
       re.run_id, {attempt}, re.lifecycle_state, re.lifecycle_time
FROM names n
JOIN readmodel.run_edges re
  ON re.namespace = n.namespace AND re.name = n.name AND re.direction = 'output'{attempt_join}
WHERE re.first_seen <= %(as_of)s
UNION ALL
-- (a writer by static lineage declared by then, as job_edges has it now)
SELECT n.dataset_id, e.job_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM names n
JOIN readmodel.job_edges e
  ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'
WHERE e.source = 'static' AND e.first_seen <= %(as_of)s"""
# Each edge's run's failure by T (the attempt columns), read for the datasets asked about;
# the walk upstream reads no attempt (UPSTREAM: a lineage_runs probe a run edge it spared).
ATTEMPT_AS_OF = (
    "lr.failed_at AS attempt_at, lr.run_id AS attempt_run, lr.failed_state AS attempt_state"
)
ATTEMPT_JOIN_AS_OF = """
LEFT JOIN readmodel.lineage_runs lr ON lr.run_id = re.run_id AND lr.failed_at <= %(as_of)s"""
NO_ATTEMPT = "NULL::timestamptz, NULL::uuid, NULL::text"
# The writes of the inputs that are not among the datasets asked about (rows dataset_id,
# write_at, run_id), as above.
INPUT_OUTS_NOW = """
SELECT n.dataset_id, e.last_write_at AS write_at, e.last_write_run AS run_id
FROM readmodel.dataset_names n
JOIN readmodel.job_edges e
  ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'
WHERE n.dataset_id = ANY(ARRAY(SELECT DISTINCT input FROM inputs
                               WHERE input <> ALL(%(datasets)s::uuid[])))"""
INPUT_OUTS_AS_OF = """
SELECT n.dataset_id,
       CASE WHEN re.last_write_at <= %(as_of)s THEN re.last_write_at
            ELSE re.first_write_at END AS write_at, re.run_id
FROM readmodel.dataset_names n
JOIN readmodel.run_edges re
  ON re.namespace = n.namespace AND re.name = n.name AND re.direction = 'output'
WHERE n.dataset_id = ANY(ARRAY(SELECT DISTINCT input FROM inputs
                               WHERE input <> ALL(%(datasets)s::uuid[])))
  AND re.first_write_at <= %(as_of)s"""
# The writers whose latest run failed (rows job_id, at, run): now, its latest run; as of
# T, its latest run started by then, failed by then and not completed after that.
FAILED_NOW = """
SELECT j.id AS job_id, r.state_time AS at, r.id AS run
FROM (SELECT DISTINCT job_id FROM pairs) w
JOIN readmodel.jobs j ON j.id = w.job_id
JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE r.state IN ('FAIL', 'ABORT')"""
FAILED_AS_OF = f"""
SELECT w.job_id, lr.failed_at AS at, lr.run_id AS run
FROM (SELECT DISTINCT job_id FROM pairs) w
JOIN readmodel.lineage_runs lr ON lr.run_id = {asof.latest_run("w.job_id")}
WHERE lr.failed_at <= %(as_of)s
  AND (lr.last_complete IS NULL OR lr.last_complete > %(as_of)s
       OR lr.last_complete < lr.failed_at)"""
# A node's display name as of T: the most table-like of its names then (rows dataset_id,
# namespace, name; projections.datasets.display_key's rule, as asof.DISPLAY_NAME_AT).
# Now it is the dataset's own.
DISPLAY_AS_OF = f"""
LEFT JOIN (
    SELECT DISTINCT ON (dataset_id) dataset_id, namespace, name FROM names n{{visible}}
    ORDER BY dataset_id, {asof.display_rank("n")}, first_seen, namespace, name) dn
  ON dn.dataset_id = d.id"""
# A stale reason's input under its display name (joined as `ind`).
INPUT_NAME_NOW = "LEFT JOIN readmodel.datasets ind ON ind.id = f.input"
INPUT_NAME_AS_OF = f"LEFT JOIN LATERAL {asof.display_name_at('f.input')} ind ON true"
# The state of a write's, attempt's or failure's run: now its state; as of T its state then
# (a run that FAILed and COMPLETEd on a retry later was FAIL in between).
RUN_AT = "\nLEFT JOIN readmodel.lineage_runs lr ON lr.run_id = f.run" + asof.run_at_join("f.run")
RUN_STATE_AS_OF = "coalesce(s.event_type, r.state)"
# Its lifecycle state: now its facet's; as of T the latest its writers reported by then
# (joined as `lc`).
LIFECYCLE_AS_OF = """
LEFT JOIN (
    SELECT DISTINCT ON (dataset_id) dataset_id, lifecycle_state, lifecycle_time FROM outs
    WHERE lifecycle_time <= %(as_of)s ORDER BY dataset_id, lifecycle_time DESC) lc
  ON lc.dataset_id = d.id"""

# Rows (kind, dataset_id, at, run, its job id, namespace, name and state, attempt state,
# input id, namespace, name; then for kind `node`: name count, display namespace and
# name, type, lifecycle and owners as JSON, its next write as JSON: lateness.py). Kinds:
# `write`, the latest write; `attempt`, a failed attempt after it; `writer_failed` and
# `input_rewritten`, why it is stale; `input`, a dataset the latest write read (the walk
# upstream follows them); `node`, what the node shows.
FACTS = """names AS MATERIALIZED ({names}),
outs AS MATERIALIZED ({outs}),
writes AS MATERIALIZED (
    SELECT DISTINCT ON (dataset_id) dataset_id, write_at AS at, run_id AS run FROM outs
    WHERE write_at IS NOT NULL ORDER BY dataset_id, write_at DESC, run_id DESC),
pairs AS MATERIALIZED (SELECT DISTINCT dataset_id, job_id FROM outs),
failed AS MATERIALIZED ({failed}),
inputs AS MATERIALIZED (
    SELECT DISTINCT w.dataset_id, n.dataset_id AS input
    FROM writes w
    JOIN readmodel.run_edges e ON e.run_id = w.run AND e.direction = 'input'
    JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
    WHERE n.dataset_id <> w.dataset_id)"""
# A writer's latest run failed after the dataset's latest write (rows dataset_id, at, run).
WRITER_FAILED = """
    SELECT DISTINCT p.dataset_id, f.at, f.run
    FROM pairs p
    JOIN failed f ON f.job_id = p.job_id
    LEFT JOIN writes w ON w.dataset_id = p.dataset_id
    WHERE w.at IS NULL OR f.at > w.at"""
# A `kind` reason's run (`f.run`) with its job and state then, and its input dataset
# (`f.input`) under its display name: the columns of STATEMENT's rows but the node's.
REASON = """SELECT f.kind, f.dataset_id, f.at, f.run, r.job_id, r.job_namespace, r.job_name,
       {run_state}, f.state, f.input, ind.namespace, ind.name,
       NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text
FROM found f
LEFT JOIN readmodel.runs r ON r.id = f.run{run_at}
{input_name}"""
STATEMENT = """
WITH RECURSIVE {facts},
input_writes AS MATERIALIZED (
    -- (an input that is one of the datasets asked about: its write is known already)
    SELECT dataset_id AS input, at, run FROM writes
    WHERE dataset_id IN (SELECT input FROM inputs)
  UNION ALL
    SELECT * FROM (
        SELECT DISTINCT ON (dataset_id) dataset_id AS input, write_at AS at, run_id AS run
        FROM ({input_outs}) o
        WHERE write_at IS NOT NULL ORDER BY dataset_id, write_at DESC, run_id DESC) o),
hop(n, batch, seen, looked, srcs, ins, f_ds, f_at, f_run) AS ({upstream}),
found AS (
    SELECT 'write' AS kind, dataset_id, at, run, NULL::text AS state, NULL::uuid AS input
    FROM writes
  UNION ALL
    SELECT * FROM (
        SELECT DISTINCT ON (o.dataset_id) 'attempt', o.dataset_id, o.attempt_at,
               o.attempt_run, o.attempt_state, NULL::uuid
        FROM outs o LEFT JOIN writes w ON w.dataset_id = o.dataset_id
        WHERE o.attempt_at IS NOT NULL AND (w.at IS NULL OR o.attempt_at > w.at)
        ORDER BY o.dataset_id, o.attempt_at DESC, o.attempt_run DESC) a
  UNION ALL
    SELECT 'writer_failed', dataset_id, at, run, NULL, NULL::uuid FROM ({writer_failed}) x
  UNION ALL
    SELECT DISTINCT 'input_rewritten', i.dataset_id, iw.at, NULL::uuid, NULL, i.input
    FROM inputs i
    JOIN input_writes iw ON iw.input = i.input
    JOIN writes w ON w.dataset_id = i.dataset_id
    WHERE iw.at > w.at
  UNION ALL
    SELECT 'input', dataset_id, NULL::timestamptz, NULL::uuid, NULL, input FROM inputs
  UNION ALL
    -- (the datasets upstream: why they are stale, if their writer failed)
    SELECT 'writer_failed', f.dataset_id, f.at, f.run, NULL, NULL
    FROM hop, unnest(hop.f_ds, hop.f_at, hop.f_run) AS f(dataset_id, at, run))
{reason}
UNION ALL
{node}
UNION ALL
-- (the inputs of the datasets upstream are followed, never shown: no name read)
SELECT 'input', i.dataset_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, i.input, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM hop, unnest(hop.srcs, hop.ins) AS i(dataset_id, input)
"""
# The walk upstream of the datasets asked about, for the staleness that travels (`spread`):
# breadth first, a row per hop (a recursive CTE over single datasets repeats one once per
# path), from the inputs of their latest writes; each hop's datasets (`batch`: in id order,
# each once, at most {most} in all, at most {hops} hops) with FACTS read for them alone:
# the inputs of each one's latest write (`srcs`, `ins`: the next hop) and its
# `writer_failed` reasons (`f_*`). It was a statement a hop, each reading a page's freshness.
UPSTREAM = """
    SELECT 1, b.batch, %(datasets)s::uuid[] || b.batch, cardinality(b.batch), x.*
    FROM (SELECT ARRAY(SELECT DISTINCT input FROM inputs
                       WHERE input <> ALL(%(datasets)s::uuid[]) ORDER BY input LIMIT {most})
          OFFSET 0) b(batch)  -- (once, not per use)
    CROSS JOIN LATERAL ({hop_facts}) x
    WHERE cardinality(b.batch) > 0
  UNION ALL
    SELECT w.n + 1, b.batch, w.seen || b.batch, w.looked + cardinality(b.batch), x.*
    FROM hop w
    CROSS JOIN LATERAL (SELECT ARRAY(
        SELECT x FROM (SELECT unnest(w.ins) EXCEPT SELECT unnest(w.seen)) n(x)
        ORDER BY x LIMIT {most} - w.looked) OFFSET 0) b(batch)
    CROSS JOIN LATERAL ({hop_facts}) x
    WHERE w.n < {hops} AND w.looked < {most} AND cardinality(b.batch) > 0"""
# One hop's FACTS, for the datasets of array `b.batch`, as arrays (a row per hop).
HOP_FACTS = """
    WITH {facts}
    SELECT i.srcs, coalesce(i.ins, '{{}}'), f.ds, f.at, f.run
    FROM (SELECT array_agg(dataset_id) AS srcs, array_agg(input) AS ins FROM inputs) i,
         (SELECT array_agg(dataset_id) AS ds, array_agg(at) AS at, array_agg(run) AS run
          FROM ({writer_failed}) x) f"""
NODE = """
SELECT 'node', d.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       c.names, {display}, {dataset_type}, {lifecycle}, {owners}, {next_write}
FROM readmodel.datasets d
LEFT JOIN (SELECT dataset_id, count(*) AS names FROM names{counted} GROUP BY dataset_id) c
  ON c.dataset_id = d.id
{display_join}{facets}{lifecycle_join}
LEFT JOIN ({next_writes}) nw ON nw.dataset_id = d.id
WHERE d.id = ANY(%(datasets)s::uuid[])"""
# Each dataset's writers now (rows dataset_id, job_id), whose cadences give its next write
# (judged now, also as of T, as its page's): now the writers of `outs`; as of T those of
# every name now, as `names` leaves out those first seen after T.
WRITERS_NOW = "pairs"
WRITERS_AS_OF = """(
    SELECT DISTINCT n.dataset_id, e.job_id
    FROM readmodel.dataset_names n
    JOIN readmodel.job_edges e
      ON e.namespace = n.namespace AND e.name = n.name AND e.direction = 'output'
    WHERE n.dataset_id = ANY(%(datasets)s::uuid[]))"""
# Freshness alone (a list item and the dataset page show the rest from their own rows):
# the node row names the dataset only, no facets parsed, no names counted.
FRESHNESS_NODE = """
SELECT 'node', d.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, '[]'::text, NULL::text
FROM readmodel.datasets d
WHERE d.id = ANY(%(datasets)s::uuid[])"""
# The standard facets a node shows, taken out of its facets document once: the document
# (kilobytes: schema, column lineage) was parsed again for every `->` on it, six times a
# node (docs/PERFORMANCE.md).
NODE_FACETS = """
LEFT JOIN LATERAL (
    SELECT json_build_object('datasetType', x."datasetType",
                             'lifecycleStateChange', x."lifecycleStateChange",
                             'ownership', x.ownership) AS facets
    FROM json_to_record(d.facets)
         AS x("datasetType" json, "lifecycleStateChange" json, ownership json)) df ON true"""


def _facts(as_of: bool, datasets: str, attempts: bool = True) -> str:
    """FACTS for the datasets of array expression `datasets`, now or as of T; `attempts`:
    with the failed attempts of their writes (else NULL: the walk upstream's)."""
    outs = OUTS_NOW
    if as_of:
        outs = OUTS_AS_OF.format(
            attempt=ATTEMPT_AS_OF if attempts else NO_ATTEMPT,
            attempt_join=ATTEMPT_JOIN_AS_OF if attempts else "",
        )
    return FACTS.format(
        names=NAMES.format(
            datasets=datasets, seen=" AND n.first_seen <= %(as_of)s" if as_of else ""
        ),
        outs=outs,
        failed=FAILED_AS_OF if as_of else FAILED_NOW,
    )


def _reason(as_of: bool) -> str:
    return REASON.format(
        input_name=INPUT_NAME_AS_OF if as_of else INPUT_NAME_NOW,
        run_state=RUN_STATE_AS_OF if as_of else "r.state",
        run_at=RUN_AT if as_of else "",
    )


def _upstream(as_of: bool) -> str:
    hop_facts = HOP_FACTS.format(
        facts=_facts(as_of, "b.batch", attempts=False), writer_failed=WRITER_FAILED
    )
    return UPSTREAM.format(
        hop_facts=hop_facts,
        # (the first hop is past the datasets asked about: at most HOPS - 1 more)
        hops=limits.UPSTREAM_HOPS - 1,
        most=limits.UPSTREAM_DATASETS,
    )


def _statement(as_of: bool, node: str, restricted: bool = False) -> str:
    # Restricted to an Access's namespaces, a node counts and shows its readable names
    # alone (never a hidden display name); its freshness is still read from every name's
    # writes, and `hide` takes out the hidden writers and inputs it names.
    visible = visibility.mark("name", "n", where=True)
    counted = visibility.mark("name", "names", where=True)
    display = "dn.namespace, dn.name" if as_of else "d.namespace, d.name"
    display_join = DISPLAY_AS_OF.format(visible=visible) if as_of else ""
    if restricted and not as_of:
        display = "vd.shown[1], vd.shown[2]"
        shown = visibility.visible_display_name("d.id")
        display_join = f"\nLEFT JOIN LATERAL (SELECT {shown}) vd(shown) ON true"
    return visibility.for_access(
        STATEMENT.format(
            facts=_facts(as_of, "%(datasets)s::uuid[]"),
            writer_failed=WRITER_FAILED,
            input_outs=INPUT_OUTS_AS_OF if as_of else INPUT_OUTS_NOW,
            upstream=_upstream(as_of),
            reason=_reason(as_of),
            node=node.format(
                display=display,
                counted=counted,
                display_join=display_join,
                dataset_type=dataset_type("df.facets"),
                lifecycle=lifecycle("lc.lifecycle_state", "lc.lifecycle_time")
                if as_of
                else lifecycle_now("df.facets", "d.facet_times"),
                lifecycle_join=LIFECYCLE_AS_OF if as_of else "",
                owners=owners("df.facets"),
                facets=NODE_FACETS,
                # (the page's own ExpectedWrite, for all the nodes at once)
                next_write="nw.next_write",
                next_writes=lateness.expected_writes(WRITERS_AS_OF if as_of else WRITERS_NOW),
            ),
        ),
        restricted,
    )


STATEMENT_NOW = _statement(as_of=False, node=NODE)
STATEMENT_AS_OF = _statement(as_of=True, node=NODE)
RESTRICTED_NOW = _statement(as_of=False, node=NODE, restricted=True)
RESTRICTED_AS_OF = _statement(as_of=True, node=NODE, restricted=True)
FRESHNESS_NOW = _statement(as_of=False, node=FRESHNESS_NODE)
FRESHNESS_AS_OF = _statement(as_of=True, node=FRESHNESS_NODE)


class Details(msgspec.Struct, frozen=True):
    """What a dataset node shows besides its id and depth."""

    namespace: str | None  # (None: no name then; the caller keeps the current one)
    name: str | None
    name_count: int
    dataset_type: str | None
    lifecycle: models.Lifecycle | None
    owners: list[models.Owner]
    freshness: models.DatasetFreshness
    next_write: models.ExpectedWrite | None = None


def statement(as_of: dt.datetime | None, restricted: bool = False) -> str:
    """`restricted`: bind `%(readable)s` (Access.sql_params)."""
    if restricted:
        return RESTRICTED_NOW if as_of is None else RESTRICTED_AS_OF
    return STATEMENT_NOW if as_of is None else STATEMENT_AS_OF


_owners = msgspec.json.Decoder(list[models.Owner])
_lifecycle = msgspec.json.Decoder(models.Lifecycle)


def _run(r: Any) -> models.RunRef:
    job = models.JobRef(id=r[4], namespace=r[5], name=r[6]) if r[4] is not None else None
    return models.RunRef(id=r[3], job=job, state=r[7])


def _reason_order(reason: models.StaleReason) -> tuple[str, str]:
    about = reason.run.id if reason.run else reason.dataset.id if reason.dataset else ""
    return reason.reason, str(about)


class Found(msgspec.Struct):
    """What rows of `statement` say: each dataset's details, and what the walk upstream
    follows: the inputs of each one's latest write (by their display name) and the
    `writer_failed` reasons of each."""

    details: dict[uuid.UUID, Details]
    inputs: dict[uuid.UUID, dict[uuid.UUID, models.DatasetRef]]
    failed: dict[uuid.UUID, list[models.StaleReason]]


def build(found: list[Any]) -> Found:
    """Each dataset's details from the rows of `statement` (staleness of one hop: `spread`
    adds what comes from further upstream)."""
    writes: dict[uuid.UUID, models.Write] = {}
    attempts: dict[uuid.UUID, models.FailedAttempt] = {}
    reasons: dict[uuid.UUID, list[models.StaleReason]] = {}
    inputs: dict[uuid.UUID, dict[uuid.UUID, models.DatasetRef]] = {}
    nodes = []
    for r in found:
        kind, dataset = r[0], r[1]
        if kind == "node":
            nodes.append(r)
        elif kind == "write":
            writes[dataset] = models.Write(run=_run(r), at=r[2])
        elif kind == "attempt":
            attempts[dataset] = models.FailedAttempt(run=_run(r), state=r[8], at=r[2])
        elif kind == "input":
            ref = models.DatasetRef(id=r[9], namespace=r[10], name=r[11])
            inputs.setdefault(dataset, {})[r[9]] = ref
        else:
            ref = None
            if r[9] is not None:
                ref = models.DatasetRef(id=r[9], namespace=r[10], name=r[11])
            run = _run(r) if r[3] is not None else None
            reasons.setdefault(dataset, []).append(
                models.StaleReason(reason=kind, at=r[2], run=run, dataset=ref)
            )
    details = {}
    for r in nodes:
        dataset = r[1]
        details[dataset] = Details(
            namespace=r[13],
            name=r[14],
            name_count=r[12] or 0,
            dataset_type=r[15],
            lifecycle=_lifecycle.decode(r[16]) if r[16] is not None else None,
            owners=_owners.decode(r[17]),
            freshness=_freshness(
                writes.get(dataset), attempts.get(dataset), reasons.get(dataset, [])
            ),
            next_write=lateness.decode_expected_write(r[18]),
        )
    failed = {d: [x for x in why if x.reason == "writer_failed"] for d, why in reasons.items()}
    return Found(details=details, inputs=inputs, failed=failed)


def _freshness(
    write: models.Write | None,
    attempt: models.FailedAttempt | None,
    reasons: list[models.StaleReason],
) -> models.DatasetFreshness:
    why = sorted(reasons, key=_reason_order)
    why.sort(key=lambda x: x.at, reverse=True)  # (stable: the latest first, then as above)
    return models.DatasetFreshness(
        last_write=write, failed_attempt=attempt, stale=bool(why), stale_reasons=why
    )


def _run_shown(run: models.RunRef, access: Access) -> models.RunRef:
    """The run, without its job when that is hidden."""
    if run.job is None or access.reads(run.job.namespace):
        return run
    return msgspec.structs.replace(run, job=None)


def _dataset_shown(ref: models.DatasetRef | None, access: Access) -> models.DatasetRef | None:
    """The dataset, or None when the name it is shown under is hidden."""
    return ref if ref is None or access.reads(ref.namespace) else None


def hide(freshness: models.DatasetFreshness, access: Access) -> models.DatasetFreshness:
    """The freshness as an access may see it: the same facts (a write, an attempt, stale
    and why), without the hidden jobs (a run's `job` null) and datasets (a reason's
    `dataset` null) they name. Unrestricted: unchanged."""
    if not access.restricted:
        return freshness
    write, attempt = freshness.last_write, freshness.failed_attempt
    return models.DatasetFreshness(
        last_write=write and msgspec.structs.replace(write, run=_run_shown(write.run, access)),
        failed_attempt=attempt
        and msgspec.structs.replace(attempt, run=_run_shown(attempt.run, access)),
        stale=freshness.stale,
        stale_reasons=[_reason_shown(why, access) for why in freshness.stale_reasons],
    )


def _reason_shown(why: models.StaleReason, access: Access) -> models.StaleReason:
    if not access.restricted:
        return why
    return msgspec.structs.replace(
        why,
        run=why.run and _run_shown(why.run, access),
        dataset=_dataset_shown(why.dataset, access),
    )


def spread(found: Found, access: Access = EVERYTHING) -> dict[uuid.UUID, Details]:
    """The details of `found` with the staleness that travels: a dataset downstream of one
    whose writer failed is at risk (`upstream_failed`, naming the root failed run and the
    input it came through), over any number of hops: the statement walked upstream through
    the inputs of each dataset's latest write (UPSTREAM), at most limits.UPSTREAM_HOPS hops
    and limits.UPSTREAM_DATASETS datasets beyond those asked about."""
    inputs, failed = found.inputs, found.failed
    roots = _roots(inputs, failed)
    spread_details = {}
    if access.restricted:
        found = Found(
            details={
                d: msgspec.structs.replace(x, freshness=hide(x.freshness, access))
                for d, x in found.details.items()
            },
            inputs=found.inputs,
            failed=found.failed,
        )
    for dataset, details in found.details.items():
        own = {x.run.id for x in failed.get(dataset, ()) if x.run is not None}
        added: dict[uuid.UUID, models.StaleReason] = {}
        for via in sorted(inputs.get(dataset, {}).values(), key=lambda r: (r.namespace, r.name)):
            for root in roots.get(via.id, ()):
                if root.run is not None and root.run.id not in own and root.run.id not in added:
                    added[root.run.id] = models.StaleReason(
                        reason="upstream_failed", at=root.at, run=root.run, dataset=via
                    )
        if not added:
            spread_details[dataset] = details
            continue
        fresh = details.freshness
        why = [*fresh.stale_reasons, *(_reason_shown(x, access) for x in added.values())]
        spread_details[dataset] = msgspec.structs.replace(
            details, freshness=_freshness(fresh.last_write, fresh.failed_attempt, why)
        )
    return spread_details


def _roots(
    inputs: dict[uuid.UUID, dict[uuid.UUID, models.DatasetRef]],
    failed: dict[uuid.UUID, list[models.StaleReason]],
) -> dict[uuid.UUID, list[models.StaleReason]]:
    """Each dataset's root failures: its own `writer_failed` reasons and those of every
    dataset upstream of it (by the inputs known), each failed run once. A cycle is cut
    where it closes."""
    roots: dict[uuid.UUID, list[models.StaleReason]] = {}

    def visit(dataset: uuid.UUID, path: set[uuid.UUID]) -> list[models.StaleReason]:
        if dataset in roots:
            return roots[dataset]
        found = {x.run.id: x for x in failed.get(dataset, ()) if x.run is not None}
        path.add(dataset)
        for upstream in sorted(inputs.get(dataset, ())):
            if upstream not in path:
                for x in visit(upstream, path):
                    found.setdefault(x.run.id, x)  # type: ignore[union-attr]
        path.discard(dataset)
        roots[dataset] = list(found.values())
        return roots[dataset]

    for dataset in sorted(inputs):
        visit(dataset, set())
    return roots


async def of(
    conn: AsyncConnection[Any],
    datasets: Collection[uuid.UUID],
    as_of: dt.datetime | None,
    access: Access = EVERYTHING,
) -> dict[uuid.UUID, Details]:
    """The details of each of `datasets` (ids that answer as themselves, not merged), now
    or as of `as_of`, as `access` may see them (its readable names; `hide`)."""
    if not datasets:
        return {}
    restricted = access.restricted
    args: dict[str, Any] = {"datasets": list(datasets), "as_of": as_of}
    if restricted:
        args |= access.sql_params()
    found = await rows(conn, statement(as_of, restricted), args)
    return spread(build(found), access)


async def freshness_of(
    conn: AsyncConnection[Any],
    datasets: Collection[uuid.UUID],
    as_of: dt.datetime | None,
    access: Access = EVERYTHING,
) -> dict[uuid.UUID, models.DatasetFreshness]:
    """The freshness alone of each of `datasets`, as `of` gives it, in one statement."""
    if not datasets:
        return {}
    sql = FRESHNESS_NOW if as_of is None else FRESHNESS_AS_OF
    found = await rows(conn, sql, {"datasets": list(datasets), "as_of": as_of})
    details = spread(build(found), access)
    return {dataset: d.freshness for dataset, d in details.items()}
