"""The envelope check: what is accepted, what is refused and which field the refusal names."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import psycopg
import pytest

from metastore.envelope import EnvelopeError, parse_element, parse_event, split_batch
from tests.support import CONFORMANCE, conformance_files

RUN_ID = "0176a8c2-fe01-7439-87e6-56a1a1b4029f"


def run_event(**changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventType": "START",
        "eventTime": "2024-05-01T10:00:00.123Z",
        "run": {"runId": RUN_ID, "facets": {}},
        "job": {"namespace": "spark", "name": "etl.orders"},
        "inputs": [{"namespace": "s3a://warehouse", "name": "raw/orders"}],
        "outputs": [],
        "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.20.0/integration/spark",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    event.update(changes)
    return event


def encode(event: Any) -> bytes:
    return json.dumps(event).encode()


def refusal(body: bytes) -> EnvelopeError:
    with pytest.raises(EnvelopeError) as info:
        parse_event(body)
    return info.value


ACCEPTED = [
    *conformance_files("valid"),
    *conformance_files("facet_invalid"),
    *[
        path
        for folder in sorted((CONFORMANCE / "scenarios").iterdir())
        for path in conformance_files(f"scenarios/{folder.name}")
    ],
]


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_conformance_events_are_accepted_with_their_envelope_columns(path: Any) -> None:
    body = path.read_bytes()
    event = json.loads(body)
    record = parse_event(body)
    assert record.event_json == body  # stored as sent, byte for byte
    assert record.kind == "run"
    assert record.run_id == uuid.UUID(event["run"]["runId"])
    assert (record.job_namespace, record.job_name) == (
        event["job"]["namespace"],
        event["job"]["name"],
    )
    assert record.event_type == event.get("eventType")
    assert record.event_time.tzinfo is not None


@pytest.mark.parametrize(
    ("path", "pointer"),
    [
        ("compat_simple_run_event_bad_runid.json", "/run/runId"),
        ("fluentd_event_no_run_id.json", "/run/runId"),
    ],
)
def test_invalid_conformance_events_are_refused_naming_the_field(path: str, pointer: str) -> None:
    (file,) = [p for p in conformance_files("invalid") if p.name == path]
    error = refusal(file.read_bytes())
    assert (error.status, error.pointer) == (422, pointer)


def test_every_invalid_conformance_event_is_covered() -> None:
    assert len(conformance_files("invalid")) == 2


def test_the_kind_follows_from_the_shape() -> None:
    job_event = {k: v for k, v in run_event().items() if k not in ("run", "eventType")}
    dataset_event = {
        "eventTime": "2024-05-01T10:00:00Z",
        "dataset": {"namespace": "trino://trino:8080", "name": "lakehouse.sales.orders_daily"},
        "producer": "https://example.com/producer",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
    }
    job = parse_event(encode(job_event))
    dataset = parse_event(encode(dataset_event))
    assert (job.kind, job.run_id, job.job_name) == ("job", None, "etl.orders")
    assert (dataset.kind, dataset.run_id, dataset.job_name) == ("dataset", None, None)


def test_an_event_time_without_timezone_is_read_as_utc() -> None:
    record = parse_event(encode(run_event(eventTime="2024-05-01T10:00:00.5")))
    assert record.event_time == dt.datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=dt.UTC)


def test_an_event_time_with_an_offset_keeps_its_instant() -> None:
    record = parse_event(encode(run_event(eventTime="2020-12-28T19:52:00.001+10:00")))
    assert record.event_time == dt.datetime(2020, 12, 28, 9, 52, 0, 1000, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("changes", "pointer"),
    [
        ({"eventTime": "yesterday"}, "/eventTime"),
        ({"eventTime": None}, "/eventTime"),
        ({"eventType": "FINISHED"}, "/eventType"),
        ({"producer": 7}, "/producer"),
        ({"run": {"runId": "not-a-uuid"}}, "/run/runId"),
        ({"run": None}, "/run"),
        ({"job": {"namespace": "", "name": "x"}}, "/job/namespace"),
        ({"job": {"namespace": "spark"}}, "/job/name"),
        (
            {"inputs": [{"namespace": "s3", "name": "a"}, {"namespace": "s3", "name": ""}]},
            "/inputs/1/name",
        ),
        ({"outputs": {"namespace": "s3", "name": "a"}}, "/outputs"),
    ],
)
def test_a_broken_envelope_is_refused_naming_the_field(
    changes: dict[str, Any], pointer: str
) -> None:
    error = refusal(encode(run_event(**changes)))
    assert (error.status, error.pointer) == (422, pointer)


@pytest.mark.parametrize("field", ["eventTime", "producer"])
def test_a_missing_required_field_is_named(field: str) -> None:
    event = run_event()
    del event[field]
    error = refusal(encode(event))
    assert (error.status, error.pointer) == (422, f"/{field}")


JOB = {"namespace": "n", "name": "j"}


def test_a_run_without_a_run_id_is_refused() -> None:
    error = refusal(encode(run_event(run={"facets": {}})))
    assert (error.status, error.pointer) == (422, "/run/runId")


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (run_event(), "run"),
        ({"eventTime": "2024-05-01T10:00:00Z", "producer": "p", "job": JOB}, "job"),
        ({"eventTime": "2024-05-01T10:00:00Z", "producer": "p", "dataset": JOB}, "dataset"),
    ],
)
def test_schema_url_may_be_left_out_or_null_as_marquez_allows(
    event: dict[str, Any], kind: str
) -> None:
    without = {k: v for k, v in event.items() if k != "schemaURL"}
    for sent in (without, {**without, "schemaURL": None}):
        record = parse_event(encode(sent))
        assert record.kind == kind
        assert record.event_json == encode(sent)  # stored as sent


def test_a_schema_url_that_is_not_a_string_is_refused() -> None:
    error = refusal(encode(run_event(schemaURL=7)))
    assert (error.status, error.pointer) == (422, "/schemaURL")


def test_a_run_without_a_job_names_the_job() -> None:
    event = run_event()
    del event["job"]
    assert refusal(encode(event)).pointer == "/job"


def test_facets_are_not_validated() -> None:
    event = run_event(run={"runId": RUN_ID, "facets": {"parent": {"run": {"noRunId": 1}}}})
    event["job"]["facets"] = ["not", "an", "object"]
    assert parse_event(encode(event)).kind == "run"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"", 400),
        (b"   ", 400),
        (b"{", 400),
        (b"not json", 400),
        (b'{"eventTime": "2024-05-01T10:00:00Z",}', 400),
        (b'{"a": "\xff\xfe"}', 400),  # invalid UTF-8
        (b"[" * 1000 + b"]" * 1000, 400),  # nested too deeply
        (b"null", 422),
        (b"[]", 422),
        (b'"an event"', 422),
        (b"42", 422),
    ],
)
def test_hostile_bodies_get_a_4xx(body: bytes, status: int) -> None:
    assert refusal(body).status == status


def test_a_nul_character_is_refused_naming_the_field() -> None:
    event = run_event(job={"namespace": "spark", "name": "etl", "facets": {"x": {"v": "a\x00b"}}})
    error = refusal(encode(event))
    assert (error.status, error.pointer) == (422, "/job/facets/x/v")


def test_an_escaped_backslash_before_u0000_is_not_a_nul() -> None:
    event = run_event(job={"namespace": "spark", "name": "C:\\u0000dir"})
    assert parse_event(encode(event)).job_name == "C:\\u0000dir"


def test_deep_nesting_within_the_limit_and_huge_numbers_are_kept() -> None:
    event = run_event()
    event["run"]["facets"] = {"deep": json.loads("[" * 500 + "]" * 500), "big": 10**400}
    body = encode(event)
    record = parse_event(body)
    assert record.event_json == body


@pytest.mark.parametrize(
    "number",
    [
        "1e131071",
        "1e131072",
        "-1e200000",
        "1e-16383",
        "1.5e-16383",
        "0." + "1" * 16383,
        "0." + "1" * 16384,
        "1.50e3",
        "0e5",
    ],
)
def test_numbers_beyond_postgresqls_numeric_are_refused_exactly_where_jsonb_refuses_them(
    conn: psycopg.Connection[Any], number: str
) -> None:
    # The read models keep schemas and column lineage as jsonb: the envelope must refuse what
    # jsonb cannot hold (the projector could never fold it) and nothing else. PostgreSQL
    # itself is the judge.
    try:
        conn.execute("SELECT %s::jsonb", (number,))
        jsonb_holds_it = True
    except psycopg.errors.NumericValueOutOfRange:
        conn.rollback()
        jsonb_holds_it = False
    event = run_event(run={"runId": RUN_ID, "facets": {"stats": {"rows": [1, "x"]}}})
    body = encode(event).replace(b'"x"', number.encode())
    if jsonb_holds_it:
        assert parse_event(body).event_json == body
    else:
        error = refusal(body)
        assert (error.status, error.pointer) == (422, "/run/facets/stats/rows/1")
        assert "numeric" in error.detail


def test_the_digest_ignores_key_order_and_whitespace() -> None:
    event = run_event()
    reordered = dict(reversed(list(event.items())))
    compact = json.dumps(event, separators=(",", ":")).encode()
    pretty = json.dumps(reordered, indent=4).encode()
    assert parse_event(compact).digest == parse_event(pretty).digest
    assert parse_event(compact).event_json != parse_event(pretty).event_json


def test_the_digest_tells_different_events_and_numbers_apart() -> None:
    digests = {
        parse_event(encode(run_event())).digest,
        parse_event(encode(run_event(eventType="COMPLETE"))).digest,
        parse_event(
            b'{"x": 0.1000000000000000055511151231257827,' + encode(run_event())[1:]
        ).digest,
        parse_event(b'{"x": 0.1,' + encode(run_event())[1:]).digest,
    }
    assert len(digests) == 4
    same = {
        parse_event(b'{"x": 1.5,' + encode(run_event())[1:]).digest,
        parse_event(b'{"x": 1.50,' + encode(run_event())[1:]).digest,
    }
    assert len(same) == 1


def test_a_batch_reports_each_element_and_keeps_each_text() -> None:
    good = encode(run_event())
    body = b"[" + good + b', {"job": 1}, ' + good.replace(b"START", b"COMPLETE") + b"]"
    first, second, third = split_batch(body)
    assert first == good
    assert parse_element(first).event_json == good
    with pytest.raises(EnvelopeError) as info:
        parse_element(second)
    assert info.value.pointer == "/job"
    assert parse_element(third).event_type == "COMPLETE"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"", 400),
        (b"[1,", 400),
        (b"{}", 422),
        (b'{"a": [1,}', 400),  # not an array, and not JSON either
        (b"[" * 1000 + b"]" * 1000, 400),
        (b'[{"a": "\xff"}]', 400),  # invalid UTF-8 inside an element: the body is not JSON
    ],
)
def test_a_batch_that_is_not_an_array_is_refused(body: bytes, status: int) -> None:
    with pytest.raises(EnvelopeError) as info:
        split_batch(body)
    assert info.value.status == status


@pytest.mark.parametrize(
    "event_time",
    [
        "9999-12-31T23:59:59-14:00",  # year 10000 in UTC
        "9999-12-31T23:00:00-01:00",
        "0001-01-01T00:00:00+14:00",  # year 0 in UTC
        "0001-01-01T00:59:59+01:00",
    ],
)
def test_an_event_time_outside_years_1_to_9999_in_utc_is_refused(event_time: str) -> None:
    error = refusal(encode(run_event(eventTime=event_time)))
    assert (error.status, error.pointer) == (422, "/eventTime")
    assert "9999" in error.detail


@pytest.mark.parametrize(
    ("event_time", "utc"),
    [
        ("9999-12-31T23:59:59.999999Z", dt.datetime.max.replace(tzinfo=dt.UTC)),
        ("9999-12-31T23:59:59", dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)),
        ("0001-01-01T00:00:00Z", dt.datetime.min.replace(tzinfo=dt.UTC)),
        ("0001-01-01T10:00:00+10:00", dt.datetime.min.replace(tzinfo=dt.UTC)),
    ],
)
def test_event_times_at_the_ends_of_the_range_are_stored_in_utc(
    event_time: str, utc: dt.datetime
) -> None:
    record = parse_event(encode(run_event(eventTime=event_time)))
    assert record.event_time == utc and record.event_time.utcoffset() == dt.timedelta(0)


def spliced(event: dict[str, Any], where: str, extra: str) -> bytes:
    """The event's JSON with raw `extra` put right after the text `where`."""
    text = json.dumps(event)
    assert text.count(where) == 1
    return text.replace(where, where + extra).encode()


@pytest.mark.parametrize(
    ("body", "pointer", "key"),
    [
        (
            spliced(run_event(), '"eventType": "START"', ', "eventType": "FAIL"'),
            "/eventType",
            "eventType",
        ),
        (
            spliced(
                run_event(), '"name": "etl.orders"}', ', "job": {"namespace": "x", "name": "y"}'
            ),
            "/job",
            "job",
        ),
        (spliced(run_event(), '"name": "etl.orders"', ', "name": "other"'), "/job/name", "name"),
        (
            spliced(
                run_event(run={"runId": RUN_ID, "facets": {"a/b": {"x": [1, {"k": 1}]}}}),
                '{"k": 1',
                ', "k": 2',
            ),
            "/run/facets/a~1b/x/1/k",
            "k",
        ),
        # an escaped colon in one string and a repeated key elsewhere: the colons balance
        (
            spliced(
                run_event(producer="ab"), '"eventType": "START"', ', "eventType": "START"'
            ).replace(b'"ab"', b'"a\\u003ab"'),
            "/eventType",
            "eventType",
        ),
    ],
)
def test_a_key_twice_in_one_object_is_refused_naming_it(
    body: bytes, pointer: str, key: str
) -> None:
    error = refusal(body)
    assert (error.status, error.pointer) == (422, pointer)
    assert repr(key) in error.detail
    with pytest.raises(EnvelopeError):
        parse_element(body)


def test_the_same_key_in_different_objects_and_escaped_colons_are_accepted() -> None:
    event = run_event(
        run={"runId": RUN_ID, "facets": {"a": {"name": "x:y"}, "b": {"name": "\u003a"}}},
        producer="urn:a:b",
    )
    assert parse_event(encode(event)).run_id == uuid.UUID(RUN_ID)
    assert parse_event(json.dumps(event, indent=2, ensure_ascii=True).encode())
    assert parse_event(encode(event).replace(b'"x:y"', b'"x\\u003ay"'))


@pytest.mark.parametrize(
    ("changes", "pointer"),
    [
        ({"job": {"namespace": "spark", "name": "j" * 1025}}, "/job/name"),
        ({"job": {"namespace": "n" * 1025, "name": "j"}}, "/job/namespace"),
        (
            {
                "inputs": [
                    {"namespace": "s3://x", "name": "a"},
                    {"namespace": "s3://x", "name": "é" * 513},
                ]
            },
            "/inputs/1/name",
        ),
        ({"outputs": [{"namespace": "s" * 5000, "name": "a"}]}, "/outputs/0/namespace"),
    ],
)
def test_a_name_or_namespace_over_1024_bytes_is_refused_naming_it(
    changes: dict[str, Any], pointer: str
) -> None:
    error = refusal(encode(run_event(**changes)))
    assert (error.status, error.pointer) == (422, pointer)
    assert "1,024 bytes" in error.detail


def test_a_dataset_event_name_over_the_limit_is_refused_and_at_the_limit_accepted() -> None:
    def dataset_event(name: str) -> bytes:
        return encode(
            {
                "eventTime": "2024-05-01T10:00:00Z",
                "dataset": {"namespace": "trino://t:8080", "name": name},
                "producer": "https://example.com/p",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json",
            }
        )

    assert refusal(dataset_event("d" * 1025)).pointer == "/dataset/name"
    assert parse_event(dataset_event("é" * 512)).kind == "dataset"  # 1,024 bytes
