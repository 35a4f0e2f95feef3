"""/search totals count datasets, not names, through the real processes (events posted to
`metastore api`, folded by `metastore projector`, replayed by `metastore replay`).

Two tables each carry 6,000 symlinks with `a6` in every name, more names than the total
counts (10,000), and 100 tables have one name each: the total is the 102 datasets the
pages hold, exact, and the same after a replay (issue 48, item 8).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server
from tests.support import every_page, running, wait_until_folded
from tests.test_replay import replay_command

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/spark"
SYMLINKS = 6_000
PLAIN = 100


def _event(when: str, run: str, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "eventType": "COMPLETE",
        "eventTime": when,
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "job": {"namespace": "totals", "name": f"load_{run[-2:]}"},
        "run": {"runId": run},
        "inputs": [],
        "outputs": outputs,
    }


def _heavy(table: int) -> dict[str, Any]:
    """A table with SYMLINKS names, every one containing `a6`."""
    identifiers = [
        {"namespace": "hive://hms:9083", "name": f"db.a6_alias_{table}_{i:05d}", "type": "VIEW"}
        for i in range(SYMLINKS)
    ]
    symlinks = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
        "identifiers": identifiers,
    }
    name = f"heavy_a6_{table}"
    return {"namespace": "s3a://bulk", "name": name, "facets": {"symlinks": symlinks}}


EVENTS = [
    # the heavy tables first: their names come first in the table the total counts from
    _event("2026-05-01T00:00:00Z", "0191a400-0000-7000-8000-0000000000a1", [_heavy(1)]),
    _event("2026-05-01T00:01:00Z", "0191a400-0000-7000-8000-0000000000a2", [_heavy(2)]),
    _event(
        "2026-05-01T00:02:00Z",
        "0191a400-0000-7000-8000-0000000000a3",
        [{"namespace": "s3a://bulk", "name": f"plain_a6_{i:03d}"} for i in range(PLAIN)],
    ),
]


@pytest.fixture(scope="module")
def service(
    pg_server: Server, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, httpx.Client]]:
    log_dir = Path(tmp_path_factory.mktemp("totals"))
    env = {"METASTORE_AUTH": "disabled"}
    with (
        pg_server.database("totals", template_db) as url,
        running("api", url, log_dir, env=env) as api,
        httpx.Client(base_url=api.base_url, timeout=60) as client,
    ):
        with running("projector", url, log_dir, env=env):
            answer = client.post("/ingest/openlineage/batch", json=EVENTS)
            assert answer.status_code == 200, answer.text
            wait_until_folded(client, timeout=120)
        yield url, client


def _search(client: httpx.Client, **params: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    """Every hit, page by page, and each page's (total, total_is_exact)."""
    return every_page(client, "/api/v1/search", **{"limit": 50, **params})


def test_totals_count_datasets_whatever_their_names(service: tuple[str, httpx.Client]) -> None:
    url, client = service
    datasets = 2 + PLAIN
    for kind in ("dataset", None):
        params = {"q": "a6"} if kind is None else {"q": "a6", "type": kind}
        hits, totals = _search(client, **params)
        assert len(hits) == datasets
        assert len({h["id"] for h in hits}) == datasets
        assert set(totals) == {(datasets, True)}, totals
    # a filter to one namespace: the two heavy tables (their Hive names)
    hits, totals = _search(client, q="a6", namespace="hive://hms:9083")
    assert len(hits) == 2 and set(totals) == {(2, True)}

    # replayed, the read models are rebuilt (names in another order): the same total
    result = replay_command(url)
    assert result.returncode == 0, result.stderr
    hits, totals = _search(client, q="a6", type="dataset")
    assert len(hits) == datasets and set(totals) == {(datasets, True)}
