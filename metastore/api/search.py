"""GET /search?q=: jobs, datasets and namespaces whose name contains `q`, ranked.

Rank: exact name first, then names starting with `q`, then names containing it; within
a rank by the name that matched (lowercase, in byte order). Datasets match on any of
their names (symlinks included), once each under their best-ranked name, and answer with
their display name.

No page ranks every hit: each (type, rank) gives one page past the cursor and the pages
are merged. Exact and prefix hits are ranges of the name index, read in order. The total
counts hits (datasets, jobs, namespaces), not names: exact up to TOTAL_CAP. It is counted
on up to TOTAL_CAP names and, when those hold fewer hits, on the keys alone until TOTAL_CAP
hits: through the `pg_trgm` index (where the extension is installed), or, where a sample of
the table's pages says `q` is in enough names for a sequential scan to reach the cap sooner
than the index's bitmap of every name with `q`'s trigrams is built, by that scan (a
"stream"). When the names counted are all the hits, the page of substring hits is their
first ones, looked up by name; else they are a sample, which bounds where that page ends:
only the names up to the bound are read (probed for along the name index, or through the
trigram index) and sorted; a streamed type's page is probed for without the bound, among
more names. The trigram index is asked for `q`'s rarest-looking part (rare_part).

Datasets also match by the fields of their current schema (readmodel.dataset_fields), after
every name hit, those none of whose names match (api/search_fields.py): counted up to
FIELD_CAP field hits (a lower bound beyond), their page read along the fields' name index;
the names' total adds theirs.

Restricted (api/visibility.py): only readable names match (a dataset by its readable
names, the best-ranked among them, under its display name among them; jobs and
namespaces in readable namespaces), and the total counts those hits alone.
"""

from __future__ import annotations

import collections
import re
from typing import Annotated, Any, Literal, NamedTuple

from msgspec import Meta
from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import access_of
from metastore.api import models_search, params, planner, search_fields, search_probe
from metastore.api.db import connection, rows
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import TOTAL_CAP, bound_kind, decode_cursor, page
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
# How a lowercased name `{n}` matches `q`, by rank (the ranks exclude each other).
RANK_TESTS = (
    "{n} = %(exact)s",
    "{n} LIKE %(prefix)s AND {n} <> %(exact)s",
    "{contains} AND {n} NOT LIKE %(prefix)s",
)
# Whether a lowercased name `{n}` contains `q`, by whether the read goes through the trigram
# index (True): that index is asked only for `%(rare)s`, the part of `q` in fewest names
# (rare_part), and `q` is tested on the rows it gives. Asked for every trigram of `q`, it
# reads the entries of each (an exact name of 2,500,000: 40 ms, of its number alone: 1 ms).
CONTAINS = {
    False: "{n} LIKE %(pattern)s",
    True: "{n} LIKE %(rare)s AND strpos({n}, %(exact)s) > 0",
}
# pg_trgm's words: runs of letters and digits.
WORD = re.compile(r"[^\W_]+")


def rare_part(q: str) -> str:
    """The part of `q` (lowercase) the trigram index is asked for: its longest word with a
    digit in it (a table's number, a date, a hash: in few names, where the words of a
    platform's vocabulary are in many) of 4 characters or more, else all of `q`."""
    words = [w for w in WORD.findall(q.lower()) if len(w) >= 4 and any(c.isdigit() for c in w)]
    return max(words, key=len) if words else q


def contains(name: str, indexed: bool) -> str:
    """CONTAINS' test on `name`, for a read through the trigram index or not."""
    return CONTAINS[indexed].format(n=name)


def rank_test(rank: int, name: str, indexed: bool) -> str:
    """The test of RANK_TESTS[rank] on `name`, for a read through the trigram index or not."""
    return RANK_TESTS[rank].format(n=name, contains=contains(name, indexed))


RANK_OF = """CASE WHEN {n} = %(exact)s THEN 0 WHEN {n} LIKE %(prefix)s THEN 1
                WHEN {n} LIKE %(pattern)s THEN 2 END"""
# Each row: (type, key, id, namespace, name, rank, sort name, matched namespace, matched
# name); `key` the id (a namespace: its name). `~<~` is the byte order of the
# text_pattern_ops name indexes, so the scan stops after a page.
JOB_TIER = """
    SELECT 'job' AS type, j.id::text AS key, j.id, j.namespace, j.name, {rank} AS rank,
           {name} AS sort_name, j.namespace AS matched_namespace, j.name AS matched_name
    FROM {source} j
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
            FROM {source} n
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
NAMESPACE_TIER = """
    SELECT 'namespace', ns.name, NULL::uuid, ns.name, ns.name, {rank}, lower(ns.name),
           ns.name, ns.name
    FROM {source} ns
    WHERE {test} {after} {namespace}
    ORDER BY {name} USING ~<~, ns.name COLLATE "C" LIMIT %(limit)s"""


class Tier(NamedTuple):
    """Where the hits of one type are: its statement, its names' table under an alias (each
    has a `name` column), the key that orders equal names, the condition of `namespace=`
    (on the names' table alone: a dataset is in it when any of its names is)."""

    template: str
    table: str
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
        "readmodel.dataset_names",
        "n",
        "n.dataset_id",
        "AND n.dataset_id IN (SELECT x.dataset_id FROM readmodel.dataset_names x"
        " WHERE x.namespace = %(namespace)s)",
    ),
    "job": Tier(JOB_TIER, "readmodel.jobs", "j", "j.id", "AND j.namespace = %(namespace)s"),
    "namespace": Tier(
        NAMESPACE_TIER, "readmodel.namespaces", "ns", "ns.name", "AND ns.name = %(namespace)s"
    ),
}
# Restricted, a dataset hit answers under its display name among its readable names.
_VISIBLE_DISPLAY = visible_display_name("p.dataset_id")
_SHOWN = "p.dataset_id, d.namespace, d.name,"
assert _SHOWN in DATASET_TIER
# The tiers by Access.restricted.
TIERS: dict[bool, dict[HitType, Tier]] = {
    False: {k: t._replace(template=for_access(t.template, False)) for k, t in _TIERS.items()},
    True: {
        "dataset": _TIERS["dataset"]._replace(
            template=for_access(DATASET_TIER, True).replace(
                _SHOWN, f"p.dataset_id, ({_VISIBLE_DISPLAY})[1], ({_VISIBLE_DISPLAY})[2],"
            ),
            visible=name_visible(RESTRICTED, "n"),
        ),
        "job": _TIERS["job"]._replace(visible=job_visible(RESTRICTED, "j")),
        "namespace": _TIERS["namespace"]._replace(visible=namespace_visible(RESTRICTED, "ns.name")),
    },
}
# Hits of each type counted up to one past TOTAL_CAP names (a dataset's names counted as
# one dataset): (type, names read, hits, the page's bound). The bound: the (limit + 1)th
# name, in order past the cursor, among the names counted that contain `q` past its start.
# The names counted are all of the hits, or a sample of them (in the heap's order, which is
# not the names'), so a page of substring hits lies at or before the bound; hits hidden by
# a better name of the same dataset can leave it short, and it is then read without one.
COUNT_OF = "SELECT {key}, {name} FROM {table} {alias} WHERE {contains} {namespace}"
# When the names counted are all the hits (TOTAL_CAP or fewer), the page of substring hits
# is among them: the first ones in order, a dataset's by its best name (a better one hides
# the rest), looked up in the name index by the page's read (`listed`); a second read
# through the trigram index built the bitmap of every hit again (a prefix in 2,000 names,
# common trigrams: about 12 ms). NULL past the cap (a sample). Past a cursor, one more:
# the cursor's own name (shown).
LISTED = {False: "%(limit)s", True: "%(limit)s + 1"}
COUNT = f"""
    WITH found (key, low) AS MATERIALIZED ({{select}} LIMIT {TOTAL_CAP + 1})
    SELECT '{{kind}}', count(*), {{hits}},
           (SELECT low FROM found WHERE low NOT LIKE %(prefix)s {{past}}
            ORDER BY low COLLATE "C" OFFSET %(limit)s - 1 LIMIT 1),
           (SELECT array_agg(low ORDER BY low COLLATE "C") FROM (
                SELECT low FROM {{best}} best
                WHERE low NOT LIKE %(prefix)s {{past}}
                ORDER BY low COLLATE "C" LIMIT {{listed}}) first
            WHERE (SELECT count(*) FROM found) <= {TOTAL_CAP})
    FROM found"""
# A dataset is a hit under several names: counted once, listed under its best one. A job or
# a namespace has one name (no sort of 10,000 keys to count them).
HITS = {True: "count(DISTINCT key)", False: "count(*)"}
BEST = {
    True: """(SELECT DISTINCT ON (key) low FROM found
              ORDER BY key, low NOT LIKE %(prefix)s, low COLLATE "C")""",
    False: "found",
}
# How the planner reads names, whatever its estimate of a pattern's hits (a rare
# substring estimated common made it scan the whole name index in order): "trigram"
# through the pg_trgm indexes, "ordered" along the name index, "any" as it sees fit (no
# trigram index: pg_trgm not installed). Each read turns its methods off and back on.
TRIGRAM_INDEXES = """
SELECT to_regclass('readmodel.dataset_names_name_trigrams') IS NOT NULL
       AND to_regclass('readmodel.jobs_name_trigrams') IS NOT NULL"""
PLANS: dict[str, Planner | None] = {
    "trigram": Planner(("enable_seqscan", "enable_indexscan")),
    "ordered": Planner(("enable_seqscan", "enable_bitmapscan")),
    "stream": Planner(("enable_indexscan", "enable_bitmapscan")),
    "any": None,
}
# How many names a type's count reads streaming the table in its heap order (a sequential
# scan stopping at the cap) when a sample says the cap is reached within STREAM_ROWS rows:
# a trigram index's bitmap lists every name with each of `q`'s trigrams before the first
# row is read (a word in a fifth of 2,500,000 names: 120 ms, five times that of 500,000
# names), and a stream reads the cap's worth, whatever the table's size.
STREAM_ROWS = 200_000
# A streamed type's page of substring hits is probed for along the name index among this
# many names (its hits can be few among the first names in order: a word that starts no
# name of a schema is in none of its first ones), not PROBE_ROWS.
PROBE_STREAMED = STREAM_ROWS // 4
SAMPLE_PAGES = 20  # of a names' table, chosen at random: about 1,500 names
# A type's sample: (type, its hits, its names, the percent of its table's pages sampled).
SHARE = f"least(100, 100.0 * {SAMPLE_PAGES} / greatest(1, pg_relation_size('{{table}}') / 8192))"
SAMPLE = f"""
SELECT '{{kind}}', count(*) FILTER (WHERE {{name}} LIKE %(pattern)s {{namespace}}), count(*),
       {SHARE}::float8
FROM {{table}} {{alias}} TABLESAMPLE SYSTEM ({SHARE}) REPEATABLE (0)"""


# A probe (api/search_probe.py), up to the count's bound, is sent where the count stopped at
# its cap: with fewer hits the trigram bitmap is cheap, and a failed probe (a page further
# along the index than PROBE_ROWS names) is not.
PROBE_ROWS = search_probe.PROBE_ROWS


def _tier(
    tier: Tier,
    kind: HitType,
    rank: int,
    cursor: tuple[int, str, str, str] | None,
    ns: bool,
    bounded: bool = False,
    probe: bool = False,
    listed: bool = False,
    upper: bool = True,
    indexed: bool = False,
) -> str:
    """One (type, rank) of the hits, a page of it past `cursor`: '' if the cursor is past
    all of it. `bounded`: only names up to `%(upper_<type>)s` (the count's bound); `probe`
    (bounded too): only among the first PROBE_ROWS of those names in order; `listed`: only
    the names in `%(lows_<type>)s` (the count's first ones, when it counted every hit)."""
    name, key, source = tier.name, tier.key, tier.table
    if probe:
        after_name = cursor is not None and cursor[0] == rank
        column = key.split(".")[1]
        source = search_probe.source(
            tier.table,
            column,
            f"upper_{kind}" if upper else None,
            after_name,
            rows=f"probe_{kind}",
            columns=f"s.{column}, s.namespace, s.name",
        )
        name, bounded = f"{tier.alias}.low", upper
    after = ""
    if cursor is not None:
        after_rank, _, after_type, _ = cursor
        if rank < after_rank:
            return ""
        if rank == after_rank:
            if kind > after_type:
                tie = "true"
            elif kind == after_type:
                tie = f'{key}::text COLLATE "C" > %(after_key)s'
            else:
                tie = "false"
            after = f"AND {name} ~>=~ %(after_name)s AND ({name} ~>~ %(after_name)s OR {tie})"
    if bounded:
        after += f" AND {name} ~<=~ %(upper_{kind})s"
    if listed:
        after += f" AND {name} = ANY(%(lows_{kind})s)"
    return tier.template.format(
        source=source,
        name=name,
        rank=rank,
        test=rank_test(rank, name, indexed),
        after=after,
        namespace=tier.where(ns),
    )


def _counts(
    tiers: dict[HitType, Tier],
    kinds: list[HitType],
    ns: bool,
    cursor: tuple[int, str, str, str] | None,
    indexed: bool,
) -> list[str]:
    past = "AND low ~>=~ %(after_name)s" if _past_name(cursor) else ""
    return [
        COUNT.format(
            kind=k,
            select=_count_of(tiers[k], ns, indexed),
            past=past,
            listed=LISTED[bool(past)],
            hits=HITS[k == "dataset"],
            best=BEST[k == "dataset"],
        )
        for k in kinds
    ]


def _past_name(cursor: tuple[int, str, str, str] | None) -> bool:
    """Whether the cursor is among the substring hits (their names from its own on)."""
    return cursor is not None and cursor[0] == 2


def _count_of(tier: Tier, ns: bool, indexed: bool) -> str:
    return COUNT_OF.format(
        key=tier.key,
        contains=contains(tier.name, indexed),
        name=tier.name,
        table=tier.table,
        alias=tier.alias,
        namespace=tier.where(ns),
    )


# The hits of one type, a key a name (a dataset once for each of its names that match):
# read in the order the trigram plan gives, until TOTAL_CAP + 1 distinct keys are seen.
COUNT_KEYS = "SELECT {key} FROM {table} {alias} WHERE {contains} {namespace}"
KEYS_BATCH = 5_000


async def _count_distinct(
    conn: AsyncConnection[Any], plan: str, tier: Tier, ns: bool, args: Any, indexed: bool
) -> int:
    """How many hits of `tier` there are, up to TOTAL_CAP + 1, however many names each has
    (a dataset with 2,000 symlinks among them counts once): the keys stream from a
    server-side cursor planned the `plan` way, which stops once that many are seen. Run
    when the names counted reached the cap, so a common word with few names a hit costs
    no more than before."""
    sql = COUNT_KEYS.format(
        key=tier.key,
        contains=contains(tier.name, indexed),
        table=tier.table,
        alias=tier.alias,
        namespace=tier.where(ns),
    )
    seen: set[Any] = set()
    # (declared by hand: psycopg's server-side cursors do not pipeline the plan's settings)
    await pipelined(
        conn, [(f"DECLARE search_count_keys NO SCROLL CURSOR FOR {sql}", args)], off=PLANS[plan]
    )
    while len(seen) <= TOTAL_CAP:
        batch = await rows(conn, f"FETCH FORWARD {KEYS_BATCH} FROM search_count_keys")
        if not batch:
            break
        seen.update(r[0] for r in batch)
    await conn.execute("CLOSE search_count_keys")
    return min(len(seen), TOTAL_CAP + 1)


async def _plans(
    conn: AsyncConnection[Any],
    tiers: dict[HitType, Tier],
    kinds: list[HitType],
    ns: bool,
    args: dict[str, Any],
    narrowed: bool,
) -> tuple[str, dict[HitType, str]]:
    """The trigram plan ("any" without the trigram indexes) and how each type's hits are
    counted, in one round trip: "stream" where a sample of its table's pages says a
    sequential scan reaches the cap within STREAM_ROWS names and within as many names as
    the table has hits (what the trigram index's bitmap lists, at least), else the trigram
    plan. Not sampled when `q` is `narrowed` (its rare part is in few names). Sets each
    type's probe budget in `args`."""
    sampled = [] if narrowed else [k for k in kinds if k != "namespace"]
    statements: list[tuple[str, Any]] = [(TRIGRAM_INDEXES, None)]
    if sampled:
        sample = "\n UNION ALL".join(
            "("
            + SAMPLE.format(
                kind=k,
                name=tiers[k].name,
                namespace=tiers[k].where(ns),
                table=tiers[k].table,
                alias=tiers[k].alias,
            )
            + ")"
            for k in sampled
        )
        statements.append((sample, args))
    found = await pipelined(conn, statements)
    indexed = "trigram" if found[0][0][0] else "any"
    plans: dict[HitType, str] = {k: indexed for k in kinds}
    for k in kinds:
        args[f"probe_{k}"] = PROBE_ROWS
    for k, hits, names, percent in found[1] if sampled else []:
        if not hits:
            continue
        streamed = (TOTAL_CAP + 1) * names / hits  # names read to reach the cap
        if streamed <= min(STREAM_ROWS, hits * 100.0 / percent):
            plans[k] = "stream"
            args[f"probe_{k}"] = PROBE_STREAMED
    return indexed, plans


async def _read(conn: AsyncConnection[Any], plan: str, parts: list[str], args: Any) -> list[Any]:
    """The rows of `parts` (statements, UNION ALL), planned the `plan` way."""
    if not parts:
        return []
    # one round trip: the plan's settings, the statement and their restore pipelined (a
    # search sends up to eight of these)
    statement = "\n UNION ALL".join(f"({p})" for p in parts)
    return await planner.rows_planned(conn, PLANS[plan], statement, args)


class SearchQuery(params.Paged, frozen=True):
    q: Annotated[
        str,
        Meta(
            pattern=params.NO_NUL,
            min_length=1,
            max_length=200,
            description="Part of a job, dataset or namespace name, or of a dataset's field "
            "name or description.",
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
    description="Jobs, datasets and namespaces whose name contains `q` "
    "(case-insensitive), ranked: exact names, then names starting with `q`, then the rest, "
    "each by the name that matched (lowercase, in byte order). A dataset matches on any of "
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


def _cursor_key(r: Any) -> tuple[int, str, str, str]:
    return (r[5], r[6], r[0], r[1])


def _hit(r: Any) -> models_search.SearchHit:
    if r[5] >= FIRST_FIELD_RANK:
        return models_search.DatasetHit(
            id=r[2],
            namespace=r[3],
            name=r[4],
            match=MATCH[min(r[5] - FIRST_FIELD_RANK, 2)],
            matched_field=models_search.MatchedField(name=r[7], description=r[8]),
        )
    match = MATCH[r[5]]
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
    args: dict[str, Any] = {
        **access.sql_params(),
        "exact": query.q.lower(),
        "prefix": like_prefix(query.q),
        "pattern": like_substring(query.q),
        "rare": like_substring(rare := rare_part(query.q)),
        "namespace": query.namespace,
        "limit": query.limit + 1,
    }
    kinds: list[HitType] = sorted(query.type or ("dataset", "job", "namespace"))
    kind = bound_kind("search", query)
    cursor: tuple[int, str, str, str] | None = None
    if query.cursor is not None:
        cursor = decode_cursor(query.cursor, kind, [int, str, str, str])
        (_, args["after_name"], _, args["after_key"]) = cursor
    ns = query.namespace is not None
    # the trigram index is asked for a part of `q` (then no type streams: see _plans)
    narrowed = rare != query.q
    async with connection(request) as conn:
        by_trigram_plan, plans = await _plans(conn, tiers, kinds, ns, args, narrowed)
        trigrams = by_trigram_plan == "trigram"
        counts = []
        for plan in sorted(set(plans.values())):
            same = [k for k in kinds if plans[k] == plan]
            statements = _counts(tiers, same, ns, cursor, indexed=narrowed)
            counts += await _read(conn, plan, statements, args)
        counted = [(k, names, hits, upper) for k, names, hits, upper, _ in counts]
        capped = {k for k, names, _, _ in counted if names > TOTAL_CAP}
        lows = {k: low for k, _, _, _, low in counts if k not in capped}
        # past the cap of names, a type whose names were fewer hits: its hits counted
        for i, (k, names, hits, upper) in enumerate(counted):
            if names > TOTAL_CAP and hits <= TOTAL_CAP:
                hits = await _count_distinct(conn, plans[k], tiers[k], ns, args, narrowed)
                counted[i] = (k, hits, hits, upper)
        bounds = {k: upper for k, _, _, upper in counted}
        # (a listed page lies among its names: the last one bounds it when there are more)
        full = args["limit"] + _past_name(cursor)
        bounds.update({k: v[-1] if v and len(v) >= full else None for k, v in lows.items()})
        args.update({f"upper_{k}": upper for k, upper in bounds.items()})
        args.update({f"lows_{k}": v for k, v in lows.items()})
        # exact and prefix hits are ranges of the name index, read in order
        ordered = [t for k in kinds for r in range(2) if (t := _tier(tiers[k], k, r, cursor, ns))]
        found = await _read(conn, "ordered", ordered, args)
        # substring hits up to each type's bound: looked up by name where the count read
        # every hit, probed for along the name index where it stopped at its cap (a trigram
        # bitmap would list more names than it read), else (or when the probe found no page)
        # through the trigram index
        many = {k for k in capped if bounds[k] is not None or plans[k] == "stream"}
        listed = [
            t
            for k, v in lows.items()
            if v and (t := _tier(tiers[k], k, 2, cursor, ns, listed=True))
        ]
        probes = [
            t
            for k in kinds
            if k in many
            and (t := _tier(tiers[k], k, 2, cursor, ns, probe=True, upper=plans[k] != "stream"))
        ]
        probed = await _read(conn, "ordered", listed + probes, args)
        per_probe = collections.Counter(r[0] for r in probed)
        paged = {k for k in many if per_probe[k] > query.limit}
        bounded = [
            t
            for k in kinds
            if k in capped
            and k not in paged
            and (
                t := _tier(
                    tiers[k], k, 2, cursor, ns, bounded=bounds[k] is not None, indexed=narrowed
                )
            )
        ]
        substring = [r for r in probed if r[0] in paged or r[0] not in capped]
        substring += await _read(conn, by_trigram_plan, bounded, args)
        per_type = collections.Counter(r[0] for r in substring)
        short = [k for k in kinds if bounds[k] is not None and per_type[k] <= query.limit]
        substring = [r for r in substring if r[0] not in short]
        unbounded = [t for k in short if (t := _tier(tiers[k], k, 2, cursor, ns, indexed=narrowed))]
        found += substring + await _read(conn, by_trigram_plan, unbounded, args)
        fields = search_fields.Found(0, True, [])
        if "dataset" in kinds:

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
                names_past_cap=sum(hits for _, _, hits, _ in counted) > TOTAL_CAP,
                # (the datasets' count, in every namespace: did any name have `q`)
                named=ns or any(names for k, names, *_ in counts if k == "dataset"),
            )
        found += fields.rows
    # each type's page is in order: merged by (rank, name's bytes, type, key)
    found.sort(key=lambda r: (r[5], r[6].encode(), r[0], r[1]))
    items, next_cursor = page(found[: query.limit + 1], query.limit, kind, _cursor_key)
    count = sum(hits for _, _, hits, _ in counted) + fields.datasets
    exact = (
        count <= TOTAL_CAP
        and fields.exact
        and all(names <= TOTAL_CAP for _, names, _, _ in counted)
    )
    return json_response(
        request,
        models_search.SearchPage(
            items=[_hit(r) for r in items],
            next_cursor=next_cursor,
            total=min(count, TOTAL_CAP),
            total_is_exact=exact,
        ),
    )
