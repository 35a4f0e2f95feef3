"""GET /search on a store of 40,000 datasets (80,000 names) and 40,000 jobs: the ranking
and pages are the ones its description promises, a page reads a page (not every name),
and the answers do not depend on the trigram index being there.

The names are written straight into the read models (bench/search_store.py; the fold is
not the subject here); the expected answers are computed in Python from every name.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench import search_store
from metastore import name_terms
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


def _expected(url: str, q: str) -> list[tuple[str, str, str, str]]:
    """(type, id or name, matched name, match) of every hit, in the documented order."""
    q = q.lower()

    def rank(name: str) -> tuple[int, str] | None:
        if name.lower() == q:
            return (0, q)
        term = name_terms.best(name, q)
        return None if term is None else (1, term)

    best: dict[tuple[str, str], tuple[Any, ...]] = {}
    with psycopg.connect(url) as conn:
        names = conn.execute(
            "SELECT 'dataset', dataset_id::text, namespace, name FROM readmodel.dataset_names"
            " UNION ALL SELECT 'job', id::text, namespace, name FROM readmodel.jobs"
            " UNION ALL SELECT 'namespace', name, name, name FROM readmodel.namespaces"
        ).fetchall()
    for kind, key, namespace, name in names:
        ranked = rank(name)
        if ranked is None:
            continue
        order = (ranked[0], ranked[1].encode(), namespace.encode(), name.encode())
        if (kind, key) not in best or order < best[kind, key][0]:
            best[kind, key] = (order, name)

    def place(hit: tuple[tuple[str, str], tuple[Any, ...]]) -> tuple[Any, ...]:
        (kind, key), (order, _) = hit
        return (order[0], order[1], kind, key)

    def match(order: tuple[Any, ...], name: str) -> str:
        if order[0] == 0:
            return "exact"
        return "prefix" if name.lower().startswith(q) else "substring"

    hits = sorted(best.items(), key=place)
    return [(kind, key, name, match(order, name)) for (kind, key), (order, name) in hits]


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
    exact = len(expected) <= search.TOTAL_CAP
    assert all(p["total"] == min(len(expected), search.TOTAL_CAP) for p in pages)
    assert all(p["total_is_exact"] is exact for p in pages)
    # a dataset answers under its display name (the Hive one here), whichever name matched
    assert {h["namespace"] for h in hits if h["type"] == "dataset"} <= {"hive://hms:9083"}


@pytest.mark.parametrize("q", ["orders", "_1", "db3.", "db", ".db/"])
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


def test_a_prefix_of_every_name_is_counted_up_to_the_cap(store: tuple[str, str]) -> None:
    _, base_url = store
    answer = httpx.get(f"{base_url}/api/v1/search", params={"q": "db"}, timeout=30).json()
    assert (answer["total"], answer["total_is_exact"]) == (search.TOTAL_CAP, False)
    assert len(answer["items"]) == 50 and answer["next_cursor"]


def test_a_q_without_a_letter_or_digit_matches_names_at_their_start_only(
    store: tuple[str, str],
) -> None:
    """`_` starts no word (words are letters and digits) and no name here."""
    _, base_url = store
    answer = httpx.get(f"{base_url}/api/v1/search", params={"q": "_"}, timeout=30).json()
    assert (answer["items"], answer["total"], answer["total_is_exact"]) == ([], 0, True)


def test_a_page_reads_a_page_of_names_not_every_name(
    store: tuple[str, str], pg_server: Server, tmp_path: Path
) -> None:
    """Whatever the names that match, a search reads a page of each (type, rank) along an
    index in the answer's order and counts along the same ranges up to the cap: no plan
    node reads more rows than that, none reads a trigram index or scans a names' table
    (the names matching each common word here are more than the cap)."""
    log_file = server_log(pg_server)
    url, _ = store

    def plans_of(base_url: str, searches: list[str]) -> list[dict[str, Any]]:
        """The plans of each search's first two pages."""
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
        # rare words and names, fewer than 100 hits each
        rare = plans_of(api.base_url, ["_12345", "db5.orders_clicks_2", "users_123"])
        # words in a fifth of the 120,000 names, a number in a tenth, a schema in a seventh,
        # the start of every name, a number after a separator
        common = plans_of(api.base_url, ["orders", "items_", "1", "db3.", "db", "_1"])
    searches = [p for p in rare + common if "readmodel.dataset_name_terms" in p["Query Text"]]
    assert len(searches) >= 12
    # a count reads up to KEY_ROWS names' keys (then streams to 10,001 distinct hits: not
    # here, where a dataset's two names share each word)
    for plans, most in ((rare, 1_000), (common, search.KEY_ROWS)):
        for read, node in rows_read(plans):
            assert read <= most, node
    pages = [p for p in common if "count(DISTINCT" not in p["Query Text"]]
    for read, node in rows_read(pages):
        assert read <= 2_000, node
    nodes = [n for p in rare + common for n in plan_nodes(p["Plan"])]
    assert not [n for n in nodes if n.get("Index Name", "").endswith("_name_trigrams")]
    assert not [n.get("Relation Name") for n in nodes if n["Node Type"] == "Seq Scan"]
    assert [n for n in nodes if n.get("Index Name") == "dataset_name_terms_term"]
    assert [n for n in nodes if n.get("Index Name") == "job_name_terms_term"]


def test_a_word_is_found_at_its_start_not_inside_another(store: tuple[str, str]) -> None:
    """`rders` is inside every `orders` and starts no word: no hit. `clicks_1` starts a
    word of a fifth of the names (`..._clicks_1...`), `1234` one of a number's."""
    url, base_url = store
    assert _walk(base_url, "rders", 50)[0] == []
    for q in ("clicks_1", "1234", "DB/"):
        answer = httpx.get(f"{base_url}/api/v1/search", params={"q": q}, timeout=30).json()
        expected = _expected(url, q)
        assert [_seen(h) for h in answer["items"]] == expected[:50]
        assert answer["total"] == min(len(expected), search.TOTAL_CAP)
        assert "substring" in {h["match"] for h in answer["items"]}


def test_a_dataset_with_more_matching_names_than_the_server_counts_is_counted_once(
    pg_server: Server, template_db: str, tmp_path: Path
) -> None:
    """A dataset whose 41,000 names share a word, ahead in the term order of 50 datasets
    with the same word: the server's count reads KEY_ROWS names (one dataset among them),
    so the keys are streamed on, and the total is every dataset, exact."""
    heavy = search.KEY_ROWS + 1_000
    with pg_server.database("search_heavy", template_db) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            create_readmodel_tables(conn)
            conn.execute(
                "INSERT INTO readmodel.datasets (id, namespace, name, first_seen, last_seen,"
                " first_tx, first_seq, home_namespace, home_name)"
                " SELECT md5('h' || i)::uuid, 'bulk', 'x.part_b' || i, now(), now(), i, 0,"
                " 'bulk', 'x.part_b' || i FROM generate_series(0, 50) i"
            )
            conn.execute(
                "INSERT INTO readmodel.dataset_names (namespace, name, dataset_id, kind,"
                " first_seen) SELECT 'bulk', name, id, 'emitted', now()"
                " FROM readmodel.datasets"
                " UNION ALL SELECT 'hive', 'x.part_a' || lpad(i::text, 6, '0'), md5('h0')::uuid,"
                " 'symlink', now() FROM generate_series(1, %s) i",
                (heavy,),
            )
            search_store.write_terms(conn)
            conn.execute("ANALYZE")
        with running("api", url, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api:
            answer = httpx.get(
                f"{api.base_url}/api/v1/search", params={"q": "part", "type": "dataset"}
            ).json()
    assert (answer["total"], answer["total_is_exact"]) == (51, True)
    assert len(answer["items"]) == 50


def test_a_cursor_with_a_key_not_an_id_is_a_400(store: tuple[str, str]) -> None:
    _, base_url = store
    first = httpx.get(f"{base_url}/api/v1/search", params={"q": "orders"}, timeout=30).json()
    raw = base64.urlsafe_b64decode(first["next_cursor"] + "==")
    forged = json.loads(raw)
    forged[-1] = "not-an-id"
    cursor = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode().rstrip("=")
    answer = httpx.get(
        f"{base_url}/api/v1/search", params={"q": "orders", "cursor": cursor}, timeout=30
    )
    assert answer.status_code == 400
    assert answer.json()["invalid-params"][0]["name"] == "cursor"
