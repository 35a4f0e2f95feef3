"""GET /search?q=: jobs, datasets and namespaces whose name has `q` at its start or at the
start of one of its words, ranked.

Rank: exact names first; then every other hit by its term, the name from where `q` matched
on (its least such term: metastore/name_terms.py; a name's start is one), lowercase in byte
order, then by the name. Datasets match on any of their names (symlinks included), once
each under their best-ranked name, and answer with their display name.

No read grows with the names that match: exact hits are a range of the name index, the rest
a range of the term index from the cursor in the answer's order, each stopped after a page,
and the pages are merged. The total counts hits (datasets, jobs, namespaces), not names:
counted along the term range, by the server on up to KEY_ROWS terms, else streamed until
TOTAL_CAP + 1 keys are seen. Namespaces are few: read whole and ranked here.

Datasets also match by the fields of their current schema (readmodel.dataset_fields), after
every name hit, those none of whose names match (api/search_fields.py): counted up to
FIELD_CAP field hits (a lower bound beyond), their page read along the fields' name index;
the names' total adds theirs.

Restricted (api/visibility.py): only readable names match (a dataset by its readable
names, the best-ranked among them, under its display name among them; jobs and
namespaces in readable namespaces), and the total counts those hits alone.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal, NamedTuple

from msgspec import Meta
from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from metastore import name_terms
from metastore.access import access_of
from metastore.api import models_search, params, planner, search_fields
from metastore.api.db import connection, rows
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import bound_kind, decode_cursor, invalid_cursor, page
from metastore.api.planner import Planner, pipelined
from metastore.api.responses import json_response
from metastore.api.sqlparts import like_prefix, like_substring
from metastore.api.visibility import (
    RESTRICTED,
    for_access,
    job_visible,
    mark,
    name_visible,
    namespace_visible,
    visible_display_name,
)

HitType = Literal["dataset", "job", "namespace"]
MATCH: tuple[Literal["exact", "prefix", "substring"], ...] = ("exact", "prefix", "substring")
FIRST_FIELD_RANK = search_fields.FIRST_FIELD_RANK  # field hits' ranks: 3 to 6
WORD_RANK = 1
Cursor = tuple[int, str, str, str]  # (rank, sort name, type, key)
RANK_TEST = "{n} = %(exact)s"  # (exact hits: rank 0)
RANK_OF = "CASE WHEN {n} = %(exact)s THEN 0 END"
# Each row: (type, key, id, namespace, name, rank, sort name, matched namespace, matched
# name); `key` the id (a namespace: its name). `~<~` is the byte order of the
# text_pattern_ops name indexes, so the scan stops after a page.
JOB_TIER = """
    SELECT 'job' AS type, j.id::text AS key, j.id, j.namespace, j.name, {rank} AS rank,
           {name} AS sort_name, j.namespace AS matched_namespace, j.name AS matched_name
    FROM readmodel.jobs j
    WHERE {test} {after} {namespace}
    ORDER BY {name} USING ~<~, j.id LIMIT %(limit)s"""
# A dataset answers once, under its best-ranked name: a name of the same dataset that
# matches better (or as well, ahead in the order) hides this one. The page of names is
# cut before the datasets are joined for their display names: joined first, a page's
# 6,700 hits each read a dataset row to keep 51 (575 ms at 1,000,000 events). The names
# are read and sorted first, then probed in that order until a page passes (OFFSET 0
# keeps the probe out of the read; the outer query keeps the read's order): probed while
# read, a word's 1,765 names up to the bound were each probed to keep 51 (12 of 24 ms).
DATASET_TIER = (
    """
    SELECT 'dataset', p.dataset_id::text, p.dataset_id, d.namespace, d.name, {rank},
           p.low, p.namespace, p.name
    FROM (
        SELECT n.dataset_id, n.namespace, n.name, n.low
        FROM (
            SELECT n.dataset_id, n.namespace, n.name, {name} AS low
            FROM readmodel.dataset_names n
            WHERE {test} {after} {namespace}
            ORDER BY {name} USING ~<~, n.dataset_id OFFSET 0
        ) n
        WHERE NOT EXISTS (
              SELECT 1 FROM readmodel.dataset_names b
              WHERE b.dataset_id = n.dataset_id AND (b.namespace, b.name) <> (n.namespace, n.name)
                """
    + mark("name", "b")
    + """AND ("""
    + RANK_OF.format(n="lower(b.name)")
    + """,
                     lower(b.name) COLLATE "C", b.namespace COLLATE "C", b.name COLLATE "C")
                  < ({rank}, n.low COLLATE "C", n.namespace COLLATE "C",
                     n.name COLLATE "C")
              OFFSET 0)
        LIMIT %(limit)s
    ) p
    JOIN readmodel.datasets d ON d.id = p.dataset_id"""
)
# Word hits (a name's start is a word's too): a range of the term index from the cursor, in
# the answer's order (a term, then the dataset; its least name with the term is the one
# shown, looked up for the page alone). A row is its dataset's hit when its term is the
# dataset's least that matches (`first`: by the index of each dataset's terms, ordered, one
# row) and no name of the dataset is `q` exactly (an exact hit, rank 0): so a dataset
# answers once, and a row of a dataset found on an earlier page or under a lesser term is
# left out by one probe, whatever its names. `{long}`: a `q` longer than the terms or
# starting with other characters than its word (name_terms.checked_in_name) is in the
# name. The range is two bounds, not LIKE: a statement psycopg prepares (its sixth
# execution on a connection) may be planned generically, blind to a pattern's prefix, and
# `LIKE $1` then read every term.
DATASET_WORDS = (
    """
    SELECT 'dataset', p.dataset_id::text, p.dataset_id, d.namespace, d.name, 1, p.term,
           m.namespace, m.name
    FROM (
        SELECT n.term, n.dataset_id
        FROM (
            SELECT DISTINCT ON (n.term, n.dataset_id) n.term, n.dataset_id
            FROM readmodel.dataset_name_terms n
            WHERE n.term >= %(word)s AND n.term < %(word_end)s {after} {long} {namespace}
            ORDER BY n.term, n.dataset_id OFFSET 0
        ) n
        CROSS JOIN LATERAL (
            SELECT b.term FROM readmodel.dataset_name_terms b
            WHERE b.dataset_id = n.dataset_id AND b.term >= %(word)s {long_b} """
    + mark("name", "b")
    + """
            ORDER BY b.dataset_id, b.term LIMIT 1) first
        WHERE first.term = n.term
          AND NOT EXISTS (
              SELECT 1 FROM readmodel.dataset_names e
              WHERE lower(e.name) = %(exact)s AND e.dataset_id = n.dataset_id """
    + mark("name", "e")
    + """)
        LIMIT %(limit)s
    ) p
    CROSS JOIN LATERAL (
        SELECT m.namespace, m.name FROM readmodel.dataset_name_terms m
        WHERE m.dataset_id = p.dataset_id AND m.term = p.term {long_m} """
    + mark("name", "m")
    + """
        ORDER BY m.namespace COLLATE "C", m.name COLLATE "C" LIMIT 1) m
    JOIN readmodel.datasets d ON d.id = p.dataset_id"""
)
# A job has one name: left out when it is `q` exactly or has a lesser term that matches.
JOB_WORDS = """
    SELECT 'job', j.id::text, j.id, j.namespace, j.name, 1, t.term, j.namespace, j.name
    FROM (
        SELECT t.term, t.job_id FROM readmodel.job_name_terms t
        WHERE t.term >= %(word)s AND t.term < %(word_end)s {after}
        ORDER BY t.term, t.job_id OFFSET 0
    ) t
    CROSS JOIN LATERAL (
        SELECT j.id, j.namespace, j.name FROM readmodel.jobs j WHERE j.id = t.job_id OFFSET 0) j
    CROSS JOIN LATERAL (
        SELECT b.term FROM readmodel.job_name_terms b
        WHERE b.job_id = t.job_id AND b.term >= %(word)s ORDER BY b.job_id, b.term LIMIT 1) first
    WHERE first.term = t.term AND lower(j.name) <> %(exact)s {long} {namespace}
    LIMIT %(limit)s"""
# Past a word hit's cursor (a term, then the type's key), by the cursor's type.
WORDS_AFTER = {
    "dataset": {
        "dataset": "AND (n.term, n.dataset_id) > (%(after_name)s, %(after_key)s::uuid)",
        "job": "AND n.term > %(after_name)s",
        "namespace": "AND n.term > %(after_name)s",
    },
    "job": {
        "dataset": "AND t.term >= %(after_name)s",
        "job": "AND (t.term, t.job_id) > (%(after_name)s, %(after_key)s::uuid)",
        "namespace": "AND t.term > %(after_name)s",
    },
}
# The keys of every hit of a type, a name's term at a time, along the range the pages read
# (a dataset once for each of its names and words that match; an exact name is a term too).
DATASET_KEYS = """
    SELECT n.dataset_id FROM readmodel.dataset_name_terms n
    WHERE n.term >= %(word)s AND n.term < %(word_end)s {long} {namespace}"""
JOB_KEYS = """
    SELECT t.job_id FROM readmodel.job_name_terms t
    CROSS JOIN LATERAL (
        SELECT j.id FROM readmodel.jobs j WHERE j.id = t.job_id {long} {namespace} OFFSET 0) j
    WHERE t.term >= %(word)s AND t.term < %(word_end)s"""
# (without a condition on the job, its terms alone: an index-only read)
JOB_KEYS_BARE = """
    SELECT t.job_id FROM readmodel.job_name_terms t
    WHERE t.term >= %(word)s AND t.term < %(word_end)s"""
# Hits are counted up to this many (a list's total goes to pagination.TOTAL_CAP, 10,000): a
# count reads at least one key a hit, and a search box shows "1,000+".
TOTAL_CAP = 1_000
# Counted by the server on up to KEY_ROWS keys (a hit has one or two matching names and
# words, its Spark and Hive names, mostly): one statement, no key sent here. When those
# rows hold fewer distinct keys than the cap (hits with many matching names), the keys are
# streamed here, KEYS_BATCH at a time, until TOTAL_CAP + 1 are seen.
KEY_ROWS, KEYS_BATCH = 4 * (TOTAL_CAP + 1), 5_000
COUNTED = f"SELECT count(DISTINCT k), count(*) FROM (({{keys}}) LIMIT {KEY_ROWS}) x(k)"
# The namespaces with `q` in their name: ranked here (there are few).
NAMESPACES = (
    """
    SELECT ns.name, lower(ns.name), """
    + RANK_OF.format(n="lower(ns.name)")
    + """
    FROM readmodel.namespaces ns WHERE lower(ns.name) LIKE %(pattern)s {namespace}"""
)
# Every read along an index in its order, whatever the planner's estimate of a pattern's
# hits (a rare pattern estimated common made it scan a whole name index).
ORDERED = Planner(("enable_seqscan", "enable_bitmapscan"))
# How the field reads (api/search_fields.py) are planned: "trigram" through the pg_trgm
# indexes, "ordered" along the name index, "any" as the planner sees fit (no trigram index:
# pg_trgm not installed). Each read turns its methods off and back on.
TRIGRAM_INDEXES = """
SELECT to_regclass('readmodel.dataset_fields_name_trgm') IS NOT NULL"""
PLANS: dict[str, Planner | None] = {
    "trigram": Planner(("enable_seqscan", "enable_indexscan")),
    "ordered": ORDERED,
    "any": None,
}


class Tier(NamedTuple):
    """Where one type's name hits are: its statements, alias and key, the condition of
    `namespace=` (on the names alone: a dataset is in it when any of its names is)."""

    template: str
    words: str
    keys: str
    alias: str
    key: str
    in_namespace: str
    visible: str = ""  # restricted: the condition that a hit is visible (on the alias)

    def where(self, ns: bool) -> str:
        """The conditions after the name test: `namespace=`'s (`ns`), then visibility."""
        return (self.in_namespace if ns else "") + self.visible

    @property
    def name(self) -> str:
        return f"lower({self.alias}.name)"


_TIERS: dict[HitType, Tier] = {
    "dataset": Tier(
        DATASET_TIER,
        DATASET_WORDS,
        DATASET_KEYS,
        "n",
        "n.dataset_id",
        "AND n.dataset_id IN (SELECT x.dataset_id FROM readmodel.dataset_names x"
        " WHERE x.namespace = %(namespace)s)",
    ),
    "job": Tier(JOB_TIER, JOB_WORDS, JOB_KEYS, "j", "j.id", "AND j.namespace = %(namespace)s"),
}
# Restricted, a dataset hit answers under its display name among its readable names.
_VISIBLE_DISPLAY = visible_display_name("p.dataset_id")
_SHOWN = "p.dataset_id, d.namespace, d.name,"
assert _SHOWN in DATASET_TIER and _SHOWN in DATASET_WORDS


def _restricted(template: str) -> str:
    return for_access(template, True).replace(
        _SHOWN, f"p.dataset_id, ({_VISIBLE_DISPLAY})[1], ({_VISIBLE_DISPLAY})[2],"
    )


# The tiers by Access.restricted.
TIERS: dict[bool, dict[HitType, Tier]] = {
    False: {
        k: t._replace(template=for_access(t.template, False), words=for_access(t.words, False))
        for k, t in _TIERS.items()
    },
    True: {
        "dataset": _TIERS["dataset"]._replace(
            template=_restricted(DATASET_TIER),
            words=_restricted(DATASET_WORDS),
            visible=name_visible(RESTRICTED, "n"),
        ),
        "job": _TIERS["job"]._replace(visible=job_visible(RESTRICTED, "j")),
    },
}
NAMESPACE_VISIBLE = namespace_visible(RESTRICTED, "ns.name")


def _exact(tier: Tier, kind: HitType, cursor: Cursor | None, ns: bool) -> str:
    """The exact hits of one type (rank 0), a page past `cursor`: '' if the cursor is past
    them."""
    name, key = tier.name, tier.key
    after = ""
    if cursor is not None:
        after_rank, _, after_type, _ = cursor
        if after_rank > 0:
            return ""
        if kind > after_type:
            tie = "true"
        elif kind == after_type:
            tie = f'{key}::text COLLATE "C" > %(after_key)s'
        else:
            tie = "false"
        after = f"AND {name} ~>=~ %(after_name)s AND ({name} ~>~ %(after_name)s OR {tie})"
    return tier.template.format(
        name=name, rank=0, test=RANK_TEST.format(n=name), after=after, namespace=tier.where(ns)
    )


def _words(tier: Tier, kind: HitType, cursor: Cursor | None, ns: bool, long: bool) -> str:
    """The word hits of one type, a page past `cursor`: '' if the cursor is past them."""
    after = ""
    if cursor is not None:
        if cursor[0] > WORD_RANK:
            return ""
        if cursor[0] == WORD_RANK:
            after = WORDS_AFTER[kind][cursor[2]]
    return tier.words.format(
        after=after,
        namespace=tier.where(ns),
        long=LONG.format(n=tier.alias) if long else "",
        long_b=LONG.format(n="b") if long else "",
        long_m=LONG.format(n="m") if long else "",
    )


# A `q` longer than the stored terms (name_terms.MAX_TERM), or starting with other
# characters than its word (`_daily`), is found by its word's terms and then in the name.
LONG = "AND strpos(lower({n}.name), %(exact)s) > 0"


def _keys(tier: Tier, kind: HitType, ns: bool, long: bool) -> str:
    where = tier.where(ns)
    if kind == "job" and not where and not long:
        return JOB_KEYS_BARE
    return tier.keys.format(namespace=where, long=LONG.format(n=tier.alias) if long else "")


async def _streamed(conn: AsyncConnection[Any], keys: str, args: Any) -> int:
    """The distinct keys of `keys`' rows, up to TOTAL_CAP + 1, fetched until that many are
    seen (planned as the pages are)."""
    seen: set[Any] = set()
    await pipelined(conn, [(f"DECLARE search_keys NO SCROLL CURSOR FOR {keys}", args)], off=ORDERED)
    while len(seen) <= TOTAL_CAP:
        batch = await rows(conn, f"FETCH FORWARD {KEYS_BATCH} FROM search_keys")
        seen.update(r[0] for r in batch)
        if len(batch) < KEYS_BATCH:
            break
    await conn.execute("CLOSE search_keys")
    return min(len(seen), TOTAL_CAP + 1)


def _namespaces(found: list[Any], q: str, cursor: Cursor | None) -> tuple[int, list[Any]]:
    """The namespace hits among `found` (name, lowercase name, rank 0 or 1 or NULL): how
    many, and their rows past `cursor`."""
    hits = []
    for name, low, rank in found:
        if rank is None:
            term = name_terms.best(name, q)
            if term is None:
                continue
            rank, low = WORD_RANK, term
        hits.append(("namespace", name, None, name, name, rank, low, name, name))
    if cursor is not None:
        after = (cursor[0], cursor[1].encode(), cursor[2], cursor[3])
        return len(hits), [r for r in hits if _order(r) > after]
    return len(hits), hits


def _is_uuid(key: str) -> bool:
    try:
        uuid.UUID(key)
    except ValueError:
        return False
    return True


def _order(r: Any) -> tuple[int, bytes, str, str]:
    """A hit row's place in the answer: (rank, sort name's bytes, type, key)."""
    return (r[5], r[6].encode(), r[0], r[1])


def _cursor_key(r: Any) -> Cursor:
    return (r[5], r[6], r[0], r[1])


async def _read(conn: AsyncConnection[Any], plan: str, parts: list[str], args: Any) -> list[Any]:
    """The rows of `parts` (statements, UNION ALL), planned the `plan` way."""
    if not parts:
        return []
    # one round trip: the plan's settings, the statement and their restore pipelined
    statement = "\n UNION ALL".join(f"({p})" for p in parts)
    return await planner.rows_planned(conn, PLANS[plan], statement, args)


class SearchQuery(params.Paged, frozen=True):
    q: Annotated[
        str,
        Meta(
            pattern=params.NO_NUL,
            min_length=1,
            max_length=200,
            description="The start of a job, dataset or namespace name or of a word in it, or "
            "part of a dataset's field name or description.",
        ),
    ]
    type: Annotated[
        Annotated[list[HitType], Meta(min_length=1, max_length=3)] | None,
        Meta(description="Only hits of these types, comma-separated (`type=dataset,job`)."),
    ] = None
    namespace: Annotated[
        params.Name | None,
        Meta(
            description="Only hits in this namespace: its jobs, the datasets with any name in "
            "it (whichever name matched `q`; as /datasets?namespace= lists them and "
            "/namespaces counts them), the namespace itself.",
        ),
    ] = None


SEARCH_OP = Operation(
    "GET",
    "/search",
    "search",
    "Search jobs, datasets and namespaces by name, datasets by field",
    models_search.SearchPage,
    tag="search",
    etag_from_position=True,
    query=SearchQuery,
    expensive=True,
    description="Jobs, datasets and namespaces whose name starts with `q` or has a word "
    "starting with `q` (case-insensitive; a word is a run of letters and digits, and one "
    "begins after any other character and at an upper-case letter after a lower-case one: "
    "`q=daily` finds `orders_daily` and `ordersDaily`, not `weeklydaily`; a `q` starting "
    "with other characters, `_daily`, finds `daily` words in names that have `_daily`), "
    "ranked: exact names (`match` exact), then the rest by the name from where `q` matched "
    "on, the least such rest of the name (lowercase, in byte order: `x.orders` before "
    "`orders_daily` for `q=orders`), `match` prefix when the name starts with `q`, else "
    "substring; a name's first 64 words. "
    "A dataset matches on any of "
    "its names, answers once under its display name, with its best-ranked name that "
    "matched in `matched_name`. `type` and `namespace` narrow "
    "the hits; `total` counts them. A dataset none of whose names matches but a top-level "
    "field of its current schema does (the field's name, or its description alone) answers "
    "after every name hit, with that field in `matched_field` instead of `matched_name`: "
    "ranked a field named `q`, then one starting with it, then one containing it (`match` "
    "exact, prefix, substring), then one whose description alone contains it (`substring`), "
    "each by the field's name (lowercase, in byte order), a dataset under its best field; "
    "a `q` of fewer than 3 characters matches field names from their start only. "
    "The datasets found by a field are counted up to 1,000 fields that match: past that, "
    "`total` is a lower bound and `total_is_exact` false, and the page is still exact. "
    "With authorization configured, only names in the "
    "namespaces the caller may read match (a dataset answers under its display name among "
    "those; by a field only with a readable name), and `total` counts those hits alone.",
)
resource = Resource()


def _match(r: Any, q: str) -> Literal["exact", "prefix", "substring"]:
    """How a name hit's name matched `q` (lowercase): exact (rank 0), at its start, or at a
    later word's only (its place in the order is its least matching term either way)."""
    if r[5] == 0:
        return "exact"
    return "prefix" if r[8].lower().startswith(q) else "substring"


def _hit(r: Any, q: str) -> models_search.SearchHit:
    if r[5] >= FIRST_FIELD_RANK:
        return models_search.DatasetHit(
            id=r[2],
            namespace=r[3],
            name=r[4],
            match=MATCH[min(r[5] - FIRST_FIELD_RANK, 2)],
            matched_field=models_search.MatchedField(name=r[7], description=r[8]),
        )
    match = _match(r, q)
    if r[0] == "namespace":
        return models_search.NamespaceHit(name=r[4], match=match)
    matched = models_search.MatchedName(namespace=r[7], name=r[8])
    if r[0] == "job":
        return models_search.JobHit(
            id=r[2], namespace=r[3], name=r[4], matched_name=matched, match=match
        )
    return models_search.DatasetHit(
        id=r[2], namespace=r[3], name=r[4], matched_name=matched, match=match
    )


@resource.add(SEARCH_OP)
async def search(request: Request) -> Response:
    query: SearchQuery = SEARCH_OP.parse_query(request)
    access = await access_of(request)
    tiers = TIERS[access.restricted]
    q = query.q.lower()
    args: dict[str, Any] = {
        **access.sql_params(),
        "exact": q,
        "prefix": like_prefix(query.q),
        "word": (word := name_terms.word_of(q)[: name_terms.MAX_TERM]),
        # ('' for a `q` without a letter or digit: an empty range, no word hit)
        "word_end": name_terms.past_prefix(word) if word else "",
        "checked": (checked := name_terms.checked_in_name(q)),
        "pattern": like_substring(query.q),
        "namespace": query.namespace,
        "limit": query.limit + 1,
    }
    kinds: list[HitType] = sorted(query.type or ("dataset", "job", "namespace"))
    kind = bound_kind("search", query)
    cursor: Cursor | None = None
    if query.cursor is not None:
        cursor = decode_cursor(query.cursor, kind, [int, str, str, str])
        (_, args["after_name"], _, args["after_key"]) = cursor
        if cursor[2] != "namespace" and not _is_uuid(cursor[3]):
            raise invalid_cursor()  # (a dataset's or job's key is its id)
    ns = query.namespace is not None
    named = [k for k in kinds if k != "namespace"]
    async with connection(request) as conn:
        # one round trip: each type's count, the pages, the namespaces
        statements: list[tuple[str, Any]] = []
        keys = {k: _keys(tiers[k], k, ns, checked) for k in named}
        statements += [(COUNTED.format(keys=keys[k]), args) for k in named]
        pages = [t for k in named if (t := _exact(tiers[k], k, cursor, ns))]
        pages += [t for k in named if (t := _words(tiers[k], k, cursor, ns, checked))]
        if pages:
            statements.append(("\n UNION ALL".join(f"({p})" for p in pages), args))
        if "namespace" in kinds:
            where = ("AND ns.name = %(namespace)s" if ns else "") + (
                NAMESPACE_VISIBLE if access.restricted else ""
            )
            statements.append((NAMESPACES.format(namespace=where), args))
        answers = await pipelined(conn, statements, off=ORDERED)
        hits: dict[HitType, int] = {}
        for i, k in enumerate(named):
            ((distinct, read),) = answers[i]
            many = read == KEY_ROWS and distinct <= TOTAL_CAP
            hits[k] = await _streamed(conn, keys[k], args) if many else min(distinct, TOTAL_CAP + 1)
        found = answers[len(named)] if pages else []
        if "namespace" in kinds:
            hits["namespace"], namespace_rows = _namespaces(answers[-1], q, cursor)
            found += namespace_rows
        fields = search_fields.Found(0, True, [])
        if "dataset" in kinds:
            trigrams = bool((await rows(conn, TRIGRAM_INDEXES))[0][0])

            async def read(plan: str, parts: list[str], args: Any) -> list[Any]:
                return await _read(
                    conn, plan if trigrams or plan != "trigram" else "any", parts, args
                )

            fields = await search_fields.field_hits(
                read,
                access.restricted,
                query.q,
                ns,
                cursor,
                args,
                names_fill_page=len(found) > query.limit,
                names_past_cap=sum(hits.values()) > TOTAL_CAP,
                # (a dataset's name with `q`, in any namespace: else no field hit has one)
                named=ns or hits["dataset"] > 0,
            )
        found += fields.rows
    # each type's page is in order: merged
    found.sort(key=_order)
    items, next_cursor = page(found[: query.limit + 1], query.limit, kind, _cursor_key)
    count = sum(hits.values()) + fields.datasets
    exact = count <= TOTAL_CAP and fields.exact and all(h <= TOTAL_CAP for h in hits.values())
    return json_response(
        request,
        models_search.SearchPage(
            items=[_hit(r, q) for r in items],
            next_cursor=next_cursor,
            total=min(count, TOTAL_CAP),
            total_is_exact=exact,
        ),
    )
