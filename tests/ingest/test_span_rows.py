"""Span rows: what the request path stores on PostgreSQL, read back by PostgreSQL itself,
and what the drain makes of them in the span store."""

import pytest

from apps.ingest.decoding import SpanEvent, SpanRecord
from apps.ingest.decoding.records import DecodeResult
from apps.ingest.models import Encoding, RawBatch, Trace
from apps.ingest.services.batches import accepted_batch_store, raw_batches_drain
from apps.ingest.services.span_rows import span_rows
from tests.builders.spans import T0
from tests.builders.stored_spans import stored_span, stored_spans
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import batch_spans, expected_spans
from tests.timing import MS

pytestmark = pytest.mark.django_db

TRACE = bytes(range(1, 17))


def record(span_id: int, name: str = "op", **fields: object) -> SpanRecord:
    values: dict[str, object] = {
        "trace_id": TRACE,
        "span_id": span_id.to_bytes(8, "big"),
        "parent_span_id": None,
        "name": name,
        "service": "chat-api",
        "kind": "server",
        "start_ns": T0,
        "end_ns": T0 + 5 * MS,
        "status": "unset",
        "status_message": "",
        "attributes": {},
        "resource": {},
        "scope_name": "",
        "events": [],
    }
    values.update(fields)
    return SpanRecord(**values)  # type: ignore[arg-type]


def stored(world: TeamWorld, records: list[SpanRecord]) -> RawBatch:
    return accepted_batch_store(
        team=world.team,
        token=None,
        decoded=DecodeResult(spans=records),
    )


def test_every_field_reads_back_as_it_was_decoded(world: TeamWorld) -> None:
    records = [
        record(1, "POST /chat — ünïcode ✓", status="ok", scope_name="chat.instrumentation"),
        record(
            2,
            "chat gpt-4o",
            parent_span_id=(1).to_bytes(8, "big"),
            kind="client",
            status="error",
            status_message="upstream timeout",
            start_ns=2**63 - 2,
            end_ns=2**63 - 1,
            attributes={
                "gen_ai.provider.name": "openai",
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.request.temperature": 0.2,
                "stream": True,
                "gen_ai.response.finish_reasons": ["stop", "length"],
                "note": "NaN",
            },
            events=[SpanEvent("first_token", T0 + MS, {"chunk": 1}), SpanEvent("done", T0, {})],
        ),
    ]

    batch = stored(world, records)

    assert batch.encoding == Encoding.SPAN_ROWS
    assert batch.span_count == 2
    assert batch_spans(batch) == expected_spans(records)


def test_nul_characters_are_replaced_so_the_drain_never_fails(world: TeamWorld) -> None:
    records = [
        record(
            1,
            "bad\x00name",
            service="svc\x00",
            status_message="oops\x00",
            scope_name="\x00scope",
            attributes={"key\x00": "value\x00", "list": ["a\x00b"], "plain": "ok"},
            events=[SpanEvent("ev\x00", T0, {"x": "\x00"})],
        ),
        record(2, "fine", parent_span_id=(1).to_bytes(8, "big")),
    ]
    batch = stored(world, records)
    # The message and scope as the drain takes them: a stored span is read back without.
    [row, _] = batch_spans(batch)
    assert (row[9], row[10]) == ("oops\ufffd", "\ufffdscope")

    drained = raw_batches_drain()

    assert (drained.failed_batches, drained.spans_new) == (0, 2)
    span = stored_span((1).to_bytes(8, "big"))
    assert (span.name, span.service) == ("bad\ufffdname", "svc\ufffd")
    assert span.attributes == {"key\ufffd": "value\ufffd", "list": ["a\ufffdb"], "plain": "ok"}
    assert span.events == [{"name": "ev\ufffd", "time_ns": T0, "attributes": {"x": "\ufffd"}}]
    assert Trace.objects.get().span_count == 2


def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(world: TeamWorld) -> None:
    # The JSON of this value holds the six characters \u0000 after an escaped backslash:
    # it is ordinary text and is kept as it is.
    stored(world, [record(1, attributes={"path": "C:\\u0000"})])

    raw_batches_drain()

    assert stored_span((1).to_bytes(8, "big")).attributes == {"path": "C:\\u0000"}


def test_rows_of_many_batches_and_teams_drain_in_one_copy(world: TeamWorld) -> None:
    stored(world, [record(1), record(2, parent_span_id=(1).to_bytes(8, "big"))])
    accepted_batch_store(
        team=world.other_team,
        token=None,
        decoded=DecodeResult(spans=[record(1)]),
    )

    drained = raw_batches_drain()

    assert (drained.batches, drained.spans_new, drained.traces_touched) == (2, 3, 2)
    ours = Trace.objects.get(team=world.team)
    theirs = Trace.objects.get(team=world.other_team)
    assert (ours.span_count, theirs.span_count) == (2, 1)
    assert len(stored_spans(trace=ours)) == 2


def test_span_rows_are_empty_without_records() -> None:
    assert span_rows(1, []) == b""
