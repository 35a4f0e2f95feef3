"""GET /search's datasets found by a field of their current schema (readmodel.dataset_fields).

Those none of whose (readable) names match `q` answer after every name hit: rank 3 a field
named `q`, 4 one starting with it, 5 one containing it, 6 a field whose description alone
contains it; within a rank by the field's lowercase name (byte order), then the dataset. A
dataset answers once, under its best field.

No read grows with the fields that match: they are counted up to FIELD_CAP (a lower bound
beyond), and that count's rows, when they are all the hits, are the page. Past the cap the
page is read in the order of the name index, rank by rank, stopping after a page: a field
named or starting with `q` is a range of it; one containing `q` is read along it up to the
page's bound among the counted rows (the cap's rows in heap order, a sample of the hits:
the page lies at or before it): first probed for among the first PROBE_ROWS fields up to
it, then through the trigram indexes when the probe finds no page or those rows hold fewer
of that rank than a page (few hits to sort).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from metastore.api import search_probe
from metastore.api.visibility import for_access, mark, visible_display_name

# Field hits read to count them: exact up to this many, a lower bound beyond.
FIELD_CAP = 1_000
FIRST_FIELD_RANK = 3  # after the names' 0 to 2
# A `q` of fewer than 3 characters has no trigram to look up: every field would be read, so
# it matches field names from their start only (a range of the name index).
SHORT_Q = 3

RANK_OF = """CASE WHEN lower({f}.name) = %(exact)s THEN 3 WHEN lower({f}.name) LIKE %(prefix)s
    THEN 4 WHEN lower({f}.name) LIKE %(pattern)s THEN 5 ELSE 6 END"""
MATCHES = "(lower({f}.name) LIKE %(pattern)s OR lower({f}.description) LIKE %(pattern)s)"
SHORT_MATCHES = "lower({f}.name) LIKE %(prefix)s"
# How a field `{f}` matches at each rank (the ranks exclude each other).
RANK_TESTS = {
    3: "lower({f}.name) = %(exact)s",
    4: "lower({f}.name) LIKE %(prefix)s AND lower({f}.name) <> %(exact)s",
    5: "lower({f}.name) LIKE %(pattern)s AND lower({f}.name) NOT LIKE %(prefix)s",
    6: "lower({f}.name) NOT LIKE %(pattern)s AND lower({f}.description) LIKE %(pattern)s",
}
# A field hit's dataset: none of its (readable) names matches, in `namespace=` when given,
# restricted with a readable name. Each test is a probe by the dataset's id for each field
# read (OFFSET 0 keeps the planner from making it a join, which read every name).
FILTERS = """
      {namespace} {unnamed} {readable}"""
# (left out when the names' count found no readable name with `q` in any namespace: then no
# field's dataset has one, and the count of a field word saved 1,001 probes, half its time)
UNNAMED = (
    """AND NOT EXISTS (
          SELECT 1 FROM readmodel.dataset_names m
          WHERE m.dataset_id = f.dataset_id AND lower(m.name) LIKE %(pattern)s """
    + mark("name", "m")
    + """ OFFSET 0)"""
)
IN_NAMESPACE = (
    "AND EXISTS (SELECT 1 FROM readmodel.dataset_names x"
    " WHERE x.dataset_id = f.dataset_id AND x.namespace = %(namespace)s OFFSET 0)"
)
READABLE = (
    "AND EXISTS (SELECT 1 FROM readmodel.dataset_names r"
    " WHERE r.dataset_id = f.dataset_id AND r.namespace = ANY(%(readable)s::text[]) OFFSET 0)"
)
# The count: up to FIELD_CAP + 1 field hits, in the order the trigram indexes give.
SAMPLE = f"""
    SELECT f.dataset_id, f.name, f.description, lower(f.name), {RANK_OF.format(f="f")}
    FROM readmodel.dataset_fields f
    WHERE {{matches}} {{filters}}
    LIMIT {FIELD_CAP + 1}"""
# One rank's page past the cursor, in the name index's order: a field that a better field
# of the same dataset (or an equal one ahead) outranks is left out, so a dataset answers once.
# The fields are read and sorted first, and tested (a probe each) in that order until a page
# passes (OFFSET 0 keeps the tests out of the read; the outer query keeps the read's order,
# which an ORDER BY there would sort again after testing all): tested while read, every
# field up to the bound was probed twice.
TIER = """
    SELECT f.dataset_id, f.name, f.description, f.low, {rank}
    FROM (
        SELECT f.dataset_id, f.name, f.description, {low} AS low
        FROM {source} f
        WHERE {test} {after}
        ORDER BY {low} USING ~<~, f.dataset_id OFFSET 0
    ) f
    WHERE true {filters}
      AND NOT EXISTS (
          SELECT 1 FROM readmodel.dataset_fields b
          WHERE b.dataset_id = f.dataset_id AND {matches_b}
            AND ({rank_b}, lower(b.name) COLLATE "C", b.name COLLATE "C")
              < ({rank}, f.low COLLATE "C", f.name COLLATE "C")
          OFFSET 0)
    LIMIT %(limit)s"""
AFTER = (
    """AND lower(f.name) ~>=~ %(after_name)s"""
    """ AND (lower(f.name) ~>~ %(after_name)s OR f.dataset_id::text COLLATE "C" > %(after_key)s)"""
)
# At or before the page's bound in the order (a field's name, then its dataset): two ranges
# of the name index, ANDed with the trigram indexes' bitmap, so only the hits up to it are
# read.
# (`~>=~ and ~<=~`, not `=`: the trigram index takes `=` too, and then every field of that
# name was read to test its dataset)
UPPER = """AND (lower(f.name) ~<~ %(field_upper)s
           OR lower(f.name) ~>=~ %(field_upper)s AND lower(f.name) ~<=~ %(field_upper)s
              AND f.dataset_id <= %(field_upper_id)s)"""
# A rank containing `q` past the cap is probed for up to the page's bound (api/search_probe.py).
PROBE_ROWS = search_probe.PROBE_ROWS
TABLE = "readmodel.dataset_fields"
# A description's word (rank 6) is probed for among the described fields alone (their own
# index, dataset_fields_described): among all, `remark` read 250,000 fields named before its
# first hit (`note_3`) and the probe failed.
DESCRIBED = "AND s.description IS NOT NULL"
# The page's datasets, joined for their display names once the page is cut.
DISPLAY = """
    SELECT x.id, {shown} FROM unnest(%(field_ids)s::uuid[]) x(id)
    LEFT JOIN readmodel.datasets d ON d.id = x.id"""
SHOWN = {
    False: "d.namespace, d.name",
    True: f"({visible_display_name('x.id')})[1], ({visible_display_name('x.id')})[2]",
}

Cursor = tuple[int, str, str, str]
Read = Any  # async (plan, statements, args) -> rows: search._read


class Found(NamedTuple):
    datasets: int  # found by a field (FIELD_CAP or fewer counted: see `exact`)
    exact: bool
    rows: list[Any]  # search.py's hit rows, a page past the cursor in rank order


def _filters(restricted: bool, ns: bool, named: bool) -> str:
    """The conditions on a field hit's dataset (`f`); `named`: some name has `q`."""
    return FILTERS.format(
        namespace=IN_NAMESPACE if ns else "",
        unnamed=for_access(UNNAMED, restricted) if named else "",
        readable=READABLE if restricted else "",
    )


def _sample(filters: str, short: bool) -> str:
    matches = (SHORT_MATCHES if short else MATCHES).format(f="f")
    return SAMPLE.format(matches=matches, filters=filters)


def _tier(
    filters: str,
    short: bool,
    rank: int,
    after: bool,
    upper: bool,
    probe: bool = False,
) -> str:
    """One rank's page past the cursor (`after`), up to the page's bound (`upper`), or
    `probe`d for among the first PROBE_ROWS fields up to it."""
    return TIER.format(
        source=search_probe.source(
            TABLE, "dataset_id", "field_upper", after, DESCRIBED if rank == 6 else ""
        )
        if probe
        else TABLE,
        low="f.low" if probe else "lower(f.name)",
        rank=rank,
        test=RANK_TESTS[rank].format(f="f"),
        after=(AFTER if after else "") + (UPPER if upper else ""),
        filters=filters,
        matches_b=(SHORT_MATCHES if short else MATCHES).format(f="b"),
        rank_b=RANK_OF.format(f="b"),
    )


def _key(r: Any) -> tuple[int, bytes, str, str]:
    """A field hit's place in search's merged order (rank, name's bytes, type, key)."""
    return (r[4], r[3].encode(), "dataset", str(r[0]))


def _past(cursor: Cursor | None) -> Any:
    if cursor is None:
        return lambda r: True
    after = (cursor[0], cursor[1].encode(), cursor[2], cursor[3])
    return lambda r: _key(r) > after


def _best(rows: list[Any]) -> list[Any]:
    """Each dataset once, under its best field, in search's order."""
    best: dict[Any, Any] = {}
    for r in rows:
        held = best.get(r[0])
        if held is None or (r[4], r[3].encode(), r[1].encode()) < (
            held[4],
            held[3].encode(),
            held[1].encode(),
        ):
            best[r[0]] = r
    return sorted(best.values(), key=_key)


async def _paged(
    read: Read,
    sample: list[Any],
    filters: str,
    short: bool,
    cursor: Cursor | None,
    args: dict[str, Any],
) -> list[Any]:
    """Past the cap: a page read rank by rank along the name index."""
    past, want = _past(cursor), args["limit"]
    page: list[Any] = []
    for rank in (3, 4) if short else (3, 4, 5, 6):
        if cursor is not None and rank < cursor[0]:
            continue
        after = cursor is not None and rank == cursor[0]
        if rank < 5:
            page += await read("ordered", [_tier(filters, short, rank, after, False)], args)
        else:
            ahead = sorted(_key(r) for r in sample if r[4] == rank and past(r))
            if len(ahead) >= want - len(page):
                _, low, _, key = ahead[want - len(page) - 1]
                args["field_upper"], args["field_upper_id"] = low.decode(), key
                probe = _tier(filters, short, rank, after, True, probe=True)
                found = await read("ordered", [probe], args)
                if len(found) < want - len(page):  # the bound lies past the probe's fields
                    bounded = _tier(filters, short, rank, after, True)
                    found = await read("trigram", [bounded], args)
            else:
                found = []
            if len(found) < want - len(page):  # few of this rank, or hidden by better fields
                found = await read("trigram", [_tier(filters, short, rank, after, False)], args)
            page += found
        if len(page) >= want:
            break
    return page


async def field_hits(
    read: Read,
    restricted: bool,
    q: str,
    ns: bool,
    cursor: Cursor | None,
    args: dict[str, Any],
    names_fill_page: bool,
    names_past_cap: bool = False,
    named: bool = True,
) -> Found:
    """The datasets a field of theirs finds: counted, and their page past `cursor` (none
    when the names' hits fill it). Neither is read when the names fill the page and their
    hits are past the total's cap already (the total cannot tell more). `named` false: no
    (readable) dataset name has `q`, so no field hit's dataset is probed for one."""
    if names_fill_page and names_past_cap:
        return Found(0, False, [])
    short = len(q) < SHORT_Q
    filters = _filters(restricted, ns, named)
    sample = await read("trigram", [_sample(filters, short)], args)
    exact = len(sample) <= FIELD_CAP
    count = len({r[0] for r in sample})
    if names_fill_page:
        hits: list[Any] = []
    elif exact:
        hits = [r for r in _best(sample) if _past(cursor)(r)]
    else:
        hits = _best(await _paged(read, sample, filters, short, cursor, args))
    hits = hits[: args["limit"]]
    if not hits:
        return Found(count, exact, [])
    args["field_ids"] = [r[0] for r in hits]
    shown = {
        r[0]: r[1:] for r in await read("any", [DISPLAY.format(shown=SHOWN[restricted])], args)
    }
    return Found(
        count,
        exact,
        [("dataset", str(r[0]), r[0], *shown[r[0]], r[4], r[3], r[1], r[2]) for r in hits],
    )
