"""GET /search on a store of 40,000 datasets (80,000 names) and 40,000 jobs: the ranking
and pages are the ones its description promises, a page reads a page (not every name),
and the answers do not depend on the trigram index being there.

The names are written straight into the read models (bench/search_store.py; the fold is
not the subject here); the expected answers are computed in Python from every name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench import search_store
from metastore.api import search
from projections.schema import create_readmodel_tables
from tests.conftest import Server
from tests.support import plan_nodes, plans_logged, rows_read, running, server_log

DATASETS, JOBS = 40_000, 40_000


@pytest.fixture(scope="module")
def store(pg_server: Server, template_db: str, tmp_path_factory: Any) -> Iterator[tuple[str, str]]:
    with pg_server.database("search", template_db) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            create_readmodel_tables(conn)
            search_store.seed(conn, DATASETS, JOBS)
        log_dir = tmp_path_factory.mktemp("search")
        with running("api", url, log_dir, env={"METASTORE_AUTH": "disabled"}) as api:
            yield url, api.base_url


MATCH = ("exact", "prefix", "substring")


def _expected(url: str, q: str) -> list[tuple[str, str, str, str]]:
    """(type, id or name, matched name, match) of every hit, in the documented order."""
    q = q.lower()

    def rank(name: str) -> int | None:
        low = name.lower()
        return 0 if low == q else 1 if low.startswith(q) else 2 if q in low else None

    best: dict[tuple[str, str], tuple[Any, ...]] = {}
    with psycopg.connect(url) as conn:
        names = conn.execute(
            "SELECT 'dataset', dataset_id::text, namespace, name FROM readmodel.dataset_names"
            " UNION ALL SELECT 'job', id::text, namespace, name FROM readmodel.jobs"
            " UNION ALL SELECT 'namespace', name, name, name FROM readmodel.namespaces"
        ).fetchall()
    for kind, key, namespace, name in names:
        r = rank(name)
        if r is None:
            continue
        order = (r, name.lower().encode(), namespace.encode(), name.encode())
        if (kind, key) not in best or order < best[kind, key][0]:
            best[kind, key] = (order, name)
    hits = sorted(best.items(), key=lambda h: (h[1][0][0], h[1][0][1], h[0][0], h[0][1]))
    return [(kind, key, name, MATCH[order[0]]) for (kind, key), (order, name) in hits]


def _seen(hit: dict[str, Any]) -> tuple[str, str, str, str]:
    if hit["type"] == "namespace":
        return ("namespace", hit["name"], hit["name"], hit["match"])
    return (hit["type"], hit["id"], hit["matched_name"]["name"], hit["match"])


def _walk(base_url: str, q: str, limit: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every hit of `q`, page by page; and the pages."""
    hits: list[dict[str, Any]] = []
    pages: list[dict[str, Any]] = []
    params: dict[str, Any] = {"q": q, "limit": limit}
    while True:
        answer = httpx.get(f"{base_url}/api/v1/search", params=params, timeout=30)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        pages.append(page)
        hits += page["items"]
        if page["next_cursor"] is None:
            return hits, pages
        params["cursor"] = page["next_cursor"]


@pytest.mark.parametrize(
    ("q", "limit"),
    [
        ("_12", 100),  # 1,111 datasets' two names, 1,111 jobs: prefix and substring hits
        ("DB2.STOCK_ORDERS_1003", 1),  # one dataset's exact Hive name
        ("orders_items", 25),  # pages of a word: 400 datasets, 400 jobs
        ("hive", 5),  # a namespace, no name
    ],
)
def test_pages_walk_every_hit_once_in_the_documented_order(
    store: tuple[str, str], q: str, limit: int
) -> None:
    url, base_url = store
    hits, pages = _walk(base_url, q, limit)
    expected = _expected(url, q)
    assert expected, q
    assert [_seen(h) for h in hits] == expected
    assert all(p["total"] == len(expected) and p["total_is_exact"] for p in pages)
    # a dataset answers under its display name (the Hive one here), whichever name matched
    assert {h["namespace"] for h in hits if h["type"] == "dataset"} <= {"hive://hms:9083"}


@pytest.mark.parametrize("q", ["orders", "_1", "db3.", "_", ".db/"])
def test_the_first_pages_of_a_word_in_more_names_than_are_counted(
    store: tuple[str, str], q: str
) -> None:
    """A word in more names than the count reads: those it read are a sample, and the
    pages they bound are still the first hits in order ("orders" in a fifth of the
    names, "_1" in a tenth, "db3." starting a tenth); the total counts hits, not names,
    so it is exact where the names are more than the cap but the hits are not ("db3.":
    two names of each of its datasets). "_" is in every name and ".db/" in every Spark
    name: counted by a scan that stops at the cap, their pages probed for along the name
    index without a bound."""
    url, base_url = store
    expected = _expected(url, q)
    hits: list[dict[str, Any]] = []
    params: dict[str, Any] = {"q": q, "limit": 50}
    for _ in range(4):
        page = httpx.get(f"{base_url}/api/v1/search", params=params, timeout=30).json()
        exact = len(expected) <= search.TOTAL_CAP
        assert page["total_is_exact"] is exact
        assert page["total"] == (len(expected) if exact else search.TOTAL_CAP)
        hits += page["items"]
        params["cursor"] = page["next_cursor"]
    assert [_seen(h) for h in hits] == expected[:200]


def test_a_word_in_every_name_is_counted_up_to_the_cap(store: tuple[str, str]) -> None:
    _, base_url = store
    answer = httpx.get(f"{base_url}/api/v1/search", params={"q": "_"}, timeout=30).json()
    assert (answer["total"], answer["total_is_exact"]) == (10_000, False)
    assert len(answer["items"]) == 50 and answer["next_cursor"]


def test_a_page_reads_a_page_of_names_not_every_name(
    store: tuple[str, str], pg_server: Server, tmp_path: Path
) -> None:
    log_file = server_log(pg_server)
    url, _ = store

    def plans_of(base_url: str, searches: list[str]) -> list[dict[str, Any]]:
        """The plans of each search's first two pages (the second pays for a count)."""
        logged()
        for q in searches:
            params = {"q": q}
            for _ in range(2):
                answer = httpx.get(f"{base_url}/api/v1/search", params=params, timeout=30)
                assert answer.status_code == 200, answer.text
                if not answer.json()["next_cursor"]:
                    break
                params["cursor"] = answer.json()["next_cursor"]
        return logged()

    with (
        plans_logged(url, log_file) as logged,
        running("api", url, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
    ):
        # rare substrings, prefixes and names, fewer than 100 hits each: what a scan in
        # name order would look for across the whole index
        rare = plans_of(api.base_url, ["_12345", "db5.orders_clicks_2", "into_users_123"])
        # words in a fifth or a seventh of the 120,000 names, a number in a tenth
        common = plans_of(api.base_url, ["orders", "db3.", "_1", "items_"])
        # in every name: "_", "."
        everywhere = plans_of(api.base_url, ["_", "."])
        with psycopg.connect(url) as conn:
            (per_page,) = conn.execute(
                "SELECT max(reltuples / relpages) FROM pg_class"
                " WHERE oid IN ('readmodel.dataset_names'::regclass, 'readmodel.jobs'::regclass)"
            ).fetchone()

    # A count reads up to 10,001 names, a page of substring hits those up to the bound the
    # count's names set, or every hit when they held less than a page of them (`db3.`
    # starts 11,428 names here and is inside none); the trigram index's bitmap of a common
    # word lists every name that has it (index entries, not rows read). The sample that
    # chooses how to count reads SAMPLE_PAGES pages of a table, whatever its size.
    def others(plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for plan in plans:
            for node in plan_nodes(plan["Plan"]):
                if node["Node Type"] == "Sample Scan":
                    assert node["Actual Rows"] <= 1.5 * search.SAMPLE_PAGES * per_page, node
        return [p for p in plans if "TABLESAMPLE" not in p["Query Text"]]

    for plans, most in ((rare, 1_000), (common, 2 * search.TOTAL_CAP)):
        assert plans
        for read, node in rows_read(others(plans), bitmaps=most <= 1_000):
            assert read <= most, node
    # A word in every name is counted by a scan that stops at the cap, not through a bitmap
    # of every name, and its page is probed for among PROBE_STREAMED names at most.
    assert everywhere
    for read, node in rows_read(others(everywhere)):
        assert read <= search.PROBE_STREAMED, node
    indexes = [n.get("Index Name", "") for p in everywhere for n in plan_nodes(p["Plan"])]
    assert not [i for i in indexes if i.endswith("_name_trigrams")]


def test_a_whole_name_asks_the_trigram_index_for_its_number_alone(
    store: tuple[str, str], pg_server: Server, tmp_path: Path
) -> None:
    """A table's whole name is mostly words every other name has: the trigram index is
    asked for its number (a few entries), not for every word's (a fifth of the index each),
    and the answer is the same."""
    url, base_url = store
    q = "db4.users_clicks_12345"
    hits, _ = _walk(base_url, q, 50)
    assert hits and [_seen(h) for h in hits] == _expected(url, q)
    with (
        plans_logged(url, server_log(pg_server)) as logged,
        running("api", url, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
    ):
        logged()
        answer = httpx.get(f"{api.base_url}/api/v1/search", params={"q": q}, timeout=30)
        assert answer.status_code == 200
        plans = logged()
    asked = [
        n["Index Cond"]
        for p in plans
        for n in plan_nodes(p["Plan"])
        if n.get("Index Name", "").endswith("_name_trigrams")
    ]
    assert asked
    assert all(cond.endswith("~~ '%12345%'::text)") for cond in asked), asked


def test_without_the_trigram_index_the_answers_are_the_same(store: tuple[str, str]) -> None:
    url, base_url = store
    queries = [("_12", 100), ("orders_items", 25), ("_1234", 3)]
    before = [_walk(base_url, q, limit)[0] for q, limit in queries]
    with psycopg.connect(url, autocommit=True) as conn:
        dropped = conn.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
            " WHERE indexrelid::regclass::text LIKE 'readmodel.%%_name_trigrams'"
        ).fetchall()
        assert len(dropped) == 2  # migrate installed pg_trgm; the DDL indexed both tables
        for index, _ in dropped:
            conn.execute(f"DROP INDEX {index}")
    try:
        after = [_walk(base_url, q, limit)[0] for q, limit in queries]
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            for _, definition in dropped:
                conn.execute(definition)
    assert after == before


def test_a_common_words_page_reads_names_in_order_and_stops_at_a_page(
    store: tuple[str, str], pg_server: Server, tmp_path: Path
) -> None:
    """Past the probe's size, a word's page of substring dataset names is read along the
    name index from the cursor, stopping after a page (or 2000 names): not
    as a bitmap of every name up to the count's bound, sorted, whose cost grows with the
    names that have the word (issue 46). Only the counts read the names' trigram index
    (the jobs, fewer than the count's cap, are paged through theirs)."""
    log_file = server_log(pg_server)
    url, _ = store
    with (
        plans_logged(url, log_file) as logged,
        running("api", url, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
    ):
        for q in ("orders", "items_"):  # in 16,000 and 8,000 names
            pages, params = 0, {"q": q}
            logged()
            while pages < 2:  # the first page, then the next (past a cursor)
                answer = httpx.get(f"{api.base_url}/api/v1/search", params=params, timeout=30)
                assert answer.status_code == 200, answer.text
                assert len(answer.json()["items"]) == 50
                params["cursor"], pages = answer.json()["next_cursor"], pages + 1
            plans = logged()
            counts = ("MATERIALIZED", "search_count_keys")  # to 10,001 names, then keys
            substring_pages = [
                p for p in plans if "d.name, 2, p.low" in " ".join(p["Query Text"].split())
            ]
            assert len(substring_pages) == 2
            for plan in substring_pages:
                nodes = list(plan_nodes(plan["Plan"]))
                assert not [n for n in nodes if n["Node Type"].startswith("Bitmap")]
                in_order = [n for n in nodes if n.get("Index Name") == "dataset_names_name"]
                assert in_order and all(n["Actual Rows"] <= search.PROBE_ROWS for n in in_order)
            for plan in plans:
                trigrams = [
                    n
                    for n in plan_nodes(plan["Plan"])
                    if n.get("Index Name") == "dataset_names_name_trigrams"
                ]
                assert not trigrams or any(c in plan["Query Text"] for c in counts)


def test_a_word_counted_whole_pages_without_a_second_trigram_read(
    store: tuple[str, str], pg_server: Server, tmp_path: Path
) -> None:
    """A word in fewer names than the count's cap ("orders_items": 400 datasets' 800
    names): the count reads every hit, and its pages of substring hits are looked up by name
    among them along the name indexes, never through a trigram index again (a second bitmap
    of every hit: the common trigrams of a prefix cost as much as the count), in the order
    and with the totals every name gives."""
    log_file = server_log(pg_server)
    url, _ = store
    expected = _expected(url, "orders_items")
    with (
        plans_logged(url, log_file) as logged,
        running("api", url, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
    ):
        logged()
        hits, pages = _walk(api.base_url, "orders_items", 50)
        plans = logged()
    assert [_seen(h) for h in hits] == expected and len(pages) == 8
    assert all(p["total"] == len(expected) and p["total_is_exact"] for p in pages)
    trigrams = ("dataset_names_name_trigrams", "jobs_name_trigrams")
    read = [
        p["Query Text"]
        for p in plans
        if any(n.get("Index Name") in trigrams for n in plan_nodes(p["Plan"]))
    ]
    assert read and all("MATERIALIZED" in q for q in read)
