"""`make bench-scale` cannot rot: its corpus is what it claims, and its tiny mode runs end to end.

The corpus checks need no database (a few thousand events, about a second); the end-to-end
run loads 800 events through ingest into a throwaway PostgreSQL, measures every figure once
and renders the report and its pictures (the report over several sizes is checked on made
up results). Values are not checked (targets live in the benchmark).
"""

from __future__ import annotations

import collections
import hashlib
import re
import zlib
from pathlib import Path

import msgspec
import pytest

from bench import scale_corpus, scale_report
from bench.scale import sizes_for
from bench.scale_results import Figure, Point, Results, load_results
from bench.scale_storage import TableSize
from metastore.embedded_pg import EmbeddedPostgres
from metastore.envelope import parse_event
from tests.support import python_module

NUMBER = r"-?[\d,]+(\.\d+)?"
EVENTS = 3_000


@pytest.fixture(scope="module")
def corpus() -> list[bytes]:
    return list(scale_corpus.events(EVENTS, seed=7))


def test_the_corpus_is_deterministic_and_each_size_a_prefix_of_the_next(
    corpus: list[bytes],
) -> None:
    again = list(scale_corpus.events(EVENTS, seed=7))
    assert hashlib.sha256(b"\n".join(again)).digest() == hashlib.sha256(b"\n".join(corpus)).digest()
    assert list(scale_corpus.events(1_000, seed=7)) == corpus[:1_000]
    assert list(scale_corpus.events(100, seed=8)) != corpus[:100]


def test_every_event_is_one_ingest_accepts(corpus: list[bytes]) -> None:
    for body in corpus:
        parse_event(body)  # raises EnvelopeError on what ingest would refuse


def test_the_corpus_has_a_platforms_producers_failures_and_joins(corpus: list[bytes]) -> None:
    events = [msgspec.json.decode(b) for b in corpus]
    producers = {e["producer"] for e in events}
    assert {
        scale_corpus.SPARK,
        scale_corpus.TRINO,
        scale_corpus.DBT,
        scale_corpus.AIRFLOW,
    } <= producers
    assert {"START", "RUNNING", "COMPLETE", "FAIL"} <= {e["eventType"] for e in events}
    refs = [d for e in events for d in e["inputs"] + e["outputs"]]
    facets = {name for d in refs for name in d["facets"]}
    assert {"symlinks", "catalog", "columnLineage", "schema"} <= facets
    # Trino's production cluster names the tables Spark writes: the catalog map joins them.
    assert any(d["namespace"] == scale_corpus.TRINO_PROD for d in refs)
    assert "trino://trino-coordinator-default-*:8443" in scale_corpus.catalogs_yaml()
    trino_sql = [
        e["job"]["facets"]["sql"]["query"]
        for e in events
        if e["producer"] == scale_corpus.TRINO and "sql" in e["job"]["facets"]
    ]
    assert trino_sql and all(q.startswith(("SELECT", "CREATE TABLE")) for q in trino_sql)
    assert any("parent" in e["run"]["facets"] for e in events if e["producer"] == scale_corpus.DBT)


def test_spark_plans_are_plan_sized_and_compress_like_real_ones(corpus: list[bytes]) -> None:
    """50-500 KB (give or take the per-run 10 %), in about 5 % of the Spark events over a
    long run, and not more compressible than a real plan much (the corpus's CLL plan
    compresses about 8 times with zlib level 1)."""
    plans = []
    for body in corpus:
        event = msgspec.json.decode(body)
        plan = event["run"]["facets"].get("spark.logicalPlan")
        if plan is not None:
            assert event["producer"] == scale_corpus.SPARK
            plans.append(msgspec.json.encode(plan))
    assert plans
    assert all(45_000 <= len(p) <= 600_000 for p in plans), sorted(map(len, plans))[::10]
    nodes = msgspec.json.decode(plans[0])["plan"]
    assert nodes[0]["class"].startswith("org.apache.spark.sql.execution.command.")
    assert any(n["class"].endswith("HiveTableRelation") for n in nodes)
    ratios = [len(p) / len(zlib.compress(p, 1)) for p in plans[:5]]
    assert all(3 < r < 20 for r in ratios), ratios


def test_sizes_scale_the_default_steps() -> None:
    assert sizes_for(None, None) == [1_000_000, 2_500_000, 5_000_000]
    assert sizes_for(250_000, None) == [50_000, 125_000, 250_000]
    assert sizes_for(None, "1000,400") == [400, 1_000]


def _point(events: int, value: float, storage: float) -> Point:
    figures = [
        Figure("lineage depth 5 p95, ms", "ms", value, 1.0, "bare recursive CTE"),
        Figure("storage all-in, bytes/event", "bytes/event", storage, 1000.0, "JSON"),
        Figure("replay, events/s", "events/s", 12_000.0, 10_000.0, "fold rate above"),
    ]
    tables = [
        TableSize("event_log", events, 10, 20, 30, 60),
        TableSize("readmodel.runs", 1, 1, 1, 1, 3),
    ]
    return Point(events, events * 1000, figures, tables, {"jobs": 1}, {"fold": 1.0}, "0 0 0", "now")


def test_the_report_judges_targets_over_the_sizes(tmp_path: Path) -> None:
    results = Results(
        "cmd", "machine", "start", 1, [10, 20], [_point(10, 2.0, 900), _point(20, 3.1, 1100)]
    )
    rows = [
        r.strip("| ").split(" | ") for r in scale_report.render(results, [], tmp_path).split("\n")
    ]
    table = {cells[0]: cells[-1] for cells in rows if len(cells) > 3}
    assert table["lineage depth 5 p95, ms"] == "no"  # 3.1 > 1.5 x 2.0
    assert table["storage all-in, bytes/event"] == "no"  # 1,100 > 1,000 at the largest size
    assert table["replay, events/s"] == "yes"


def test_the_scale_mode_runs_end_to_end_and_draws_its_pictures(tmp_path: Path) -> None:
    out = tmp_path / "BENCHMARKS-SCALE.md"
    done = python_module(
        "bench.run", "--scale", "--sizes", "300,500,800", "--keep", "--out", str(out)
    )
    kept = re.search(r"left running: (\S+) \(data in (\S+)\)", done.stdout + done.stderr)
    try:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert kept is not None, "--keep names the store it left"
        _requery_twice_and_compare(kept.group(1), tmp_path)
    finally:
        if kept is not None:
            EmbeddedPostgres(Path(kept.group(2))).destroy()
    markdown = out.read_text()
    results = load_results(tmp_path / "scale" / "results.json")
    assert [p.events for p in results.points] == [300, 500, 800]
    # The replay reads the whole log: it runs at the first and the largest size only.
    replayed = [any(f.name == "replay, events/s" for f in p.figures) for p in results.points]
    assert replayed == [True, False, True]
    for name in (
        "batch ingest, events/s",
        "projector fold rate, events/s",
        "replay, events/s",
        "storage all-in, bytes/event",
        "replay peak RSS, MiB",
        *scale_report.QUERIES,
    ):
        row = next(line for line in markdown.splitlines() if line.startswith(f"| {name} |"))
        cells = row.strip("| ").split(" | ")
        assert re.match(NUMBER, cells[1]), row
    # Storage is split per table: the log's and each read model's.
    assert "| event_log |" in markdown and "| readmodel.runs |" in markdown
    assert results.columns["readmodel.runs"]["facets"] > 0
    for picture in ("rates.png", "queries.png", "memory.png", "storage.png"):
        assert (tmp_path / "scale" / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(scale/{picture})" in markdown


def test_the_default_steps_shrink_to_the_disk_and_asked_sizes_that_do_not_fit_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bench import scale

    def disk(free: int) -> None:
        monkeypatch.setattr(scale.shutil, "disk_usage", lambda _: shutil_usage(free))

    disk(200 * 2**30)
    assert scale.plan_sizes(None, None)[0] == [1_000_000, 2_500_000, 5_000_000]
    disk(40 * 2**30)
    sizes, said = scale.plan_sizes(None, None)
    assert sizes[-1] < 5_000_000 and sizes[-1] * scale.DISK_BYTES_PER_EVENT < 40 * 2**30
    assert "scaled" in said
    with pytest.raises(SystemExit, match="not enough disk"):
        scale.plan_sizes(5_000_000, None)


def _requery_twice_and_compare(url: str, tmp_path: Path) -> None:
    """bench.scale_requery times the run's queries again on the kept store, and compares
    two such runs figure by figure (the A/B of read paths at the largest size)."""
    outs = [tmp_path / "a.json", tmp_path / "b.json"]
    for o in outs:
        again = python_module("bench.scale_requery", url, "--out", str(o), timeout=200)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert "| search p95, ms |" in again.stdout
    compared = python_module("bench.scale_requery", "--compare", *map(str, outs)).stdout
    for name in scale_report.QUERIES:
        row = next(line for line in compared.splitlines() if line.startswith(f"| {name} |"))
        assert re.match(rf"\| {re.escape(name)} \| {NUMBER} \| {NUMBER} \| [0-9.]+ \|", row), row


def shutil_usage(free: int) -> object:
    """What shutil.disk_usage answers: (total, used, free)."""
    return collections.namedtuple("usage", "total used free")(free * 2, free, free)
