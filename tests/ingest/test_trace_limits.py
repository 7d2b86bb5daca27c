"""A trace's byte and span limits: cut in the drain, told to the client at the door."""

import json
from typing import Any

import pytest
from django.test import TestCase

from apps.ingest.models import Trace
from apps.ingest.services.batches import accepted_batch_store, raw_batches_drain
from apps.teams.models import Team
from tests.builders.spans import T0, HandSpan, encode, span
from tests.builders.stored_spans import stored_span_ids, stored_spans
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import (
    JSON,
    export_response,
    gzipped,
    ingest_token,
    native_batch,
    native_span,
    post,
)
from tests.timing import MS

URL = "/v1/traces"
GZIP = {"Content-Encoding": "gzip"}
MIB = 1024 * 1024
ROOT = 1

pytestmark = pytest.mark.usefixtures("clean_cache")


def _prompt(length: int, seed: int) -> str:
    """Prompt-like text: repetitive, so gzip and the database's compression shrink it."""
    words = f"Answer the question using the retrieved passages, passage {seed}. "
    return (words * (length // len(words) + 1))[:length]


def _heavy(span_id: int, parent: int | None = ROOT, *, size: int = MIB - 20_000) -> HandSpan:
    """A span carrying about ``size`` characters of attributes, under the 1 MiB span limit."""
    values = {f"llm.prompt.{i}": _prompt(16_000, span_id) for i in range(size // 16_000)}
    start = T0 + span_id * MS
    return span(span_id, parent, start, start + MS, name=f"llm call {span_id}", attributes=values)


def drain() -> None:
    """The workers' drain, and what it does once committed: it tells the door which
    traces it found full (in the shared cache)."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        raw_batches_drain()


def _stored_bytes(trace: Trace) -> int:
    """What a reader loads of the trace's spans: names, attributes and events as text."""
    return sum(
        len(s.name.encode()) + len(s.attributes.encode()) + len(s.events.encode())
        for s in stored_spans(trace=trace)
    )


def _send(token: str, spans: list[HandSpan]) -> Any:
    response = post(URL, gzipped(encode(spans)), token=token, headers=GZIP)
    assert response.status_code == 200, response.content
    return export_response(response)


def test_a_trace_of_64_spans_of_a_mebibyte_is_cut_at_its_byte_budget(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_TRACE_BYTES = 16 * MIB
    token = ingest_token(world.team)
    spans = [_heavy(ROOT, None)] + [_heavy(i) for i in range(2, 65)]
    # Three requests before the trace is stored: the door cannot know, the drain cuts.
    for first in (0, 8, 16):
        assert not _send(token, spans[first : first + 8]).HasField("partial_success")
    drain()

    # The trace is known full now: the next requests are told, span by span.
    for first in range(24, 64, 8):
        answer = _send(token, spans[first : first + 8])
        assert answer.partial_success.rejected_spans == 8
        assert answer.partial_success.error_message == (
            "rejected 8 spans: trace at its byte limit (8)"
        )
    drain()

    trace = Trace.objects.get(team=world.team)
    assert _stored_bytes(trace) <= 16 * MIB
    assert trace.byte_count <= 16 * MIB
    assert trace.byte_count > 15 * MIB  # gzip and jsonb compression hid nothing
    assert trace.span_count == len(stored_spans(trace=trace)) == 16
    assert trace.root_span_id == ROOT.to_bytes(8)
    # The drain refused 8 of the first 24; the door refused the other 40.
    assert trace.spans_dropped == 48
    assert 48 * 1_024_000 < trace.bytes_dropped < 48 * 1_030_000  # 48 spans of 1,024,000 characters
    assert trace.full_of == "bytes"


def test_the_spans_one_request_would_carry_a_trace_past_its_budget_are_rejected(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_TRACE_BYTES = 100_000
    token = ingest_token(world.team)
    # The root last, as an SDK exports it: it is taken first all the same.
    children = [_heavy(i, size=32_000) for i in range(2, 6)]

    answer = _send(token, [*children, _heavy(ROOT, None, size=32_000)])
    drain()

    assert answer.partial_success.rejected_spans == 2
    assert "trace at its byte limit (2)" in answer.partial_success.error_message
    trace = Trace.objects.get(team=world.team)
    assert stored_span_ids(trace=trace) == {i.to_bytes(8) for i in (ROOT, 2, 3)}
    assert trace.byte_count <= 100_000
    # Nothing was stored of this trace before the request: there was nothing to count on.
    assert trace.spans_dropped == 0


def test_a_full_trace_still_takes_its_root_when_it_comes_last(world: TeamWorld, settings) -> None:
    settings.INGEST_MAX_TRACE_BYTES = 100_000
    token = ingest_token(world.team)
    _send(token, [_heavy(i, size=32_000) for i in range(2, 5)])
    drain()

    answer = _send(token, [_heavy(5, size=32_000), _heavy(ROOT, None, size=32_000)])
    drain()

    assert answer.partial_success.rejected_spans == 1  # span 5, not the root
    trace = Trace.objects.get(team=world.team)
    assert trace.root_span_id == ROOT.to_bytes(8)
    # The documented slack: the budget, plus the root that came after the trace was full.
    assert trace.byte_count <= 100_000 + 40_000
    assert trace.spans_dropped == 1


def test_spans_past_the_span_limit_are_rejected_at_the_door_on_both_endpoints(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_SPANS_PER_TRACE = 3
    token = ingest_token(world.team)
    _send(token, [span(ROOT, None, T0, T0 + 100 * MS)] + [span(i, ROOT) for i in (2, 3)])
    drain()

    otlp = _send(token, [span(i, ROOT) for i in (4, 5)])
    native = post(
        "/api/v1/spans",
        native_batch(*(native_span(f"{i:016x}") for i in (6, 7, 8))),
        content_type=JSON,
        token=token,
    )

    assert otlp.partial_success.rejected_spans == 2
    assert otlp.partial_success.error_message == "rejected 2 spans: trace at its span limit (2)"
    body = json.loads(native.content)
    assert (native.status_code, body["accepted"], body["rejected"]) == (200, 0, 3)
    assert body["errors"][0] == f"span {6:016x}: trace at its span limit (span 4, over 3)"
    trace = Trace.objects.get(team=world.team)
    assert (trace.span_count, trace.spans_dropped, trace.full_of) == (3, 5, "spans")


def test_another_teams_trace_with_the_same_id_has_its_own_budget(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_SPANS_PER_TRACE = 2
    ours, theirs = ingest_token(world.team), ingest_token(world.other_team)
    _send(ours, [span(ROOT, None, T0, T0 + 100 * MS), span(2, ROOT)])
    drain()

    answer = _send(theirs, [span(ROOT, None, T0, T0 + 100 * MS), span(2, ROOT)])

    assert not answer.HasField("partial_success")


# --- In the drain -----------------------------------------------------------------------


def _store(team: Team, spans: list[HandSpan]) -> None:
    from apps.ingest.decoding import decode_otlp_protobuf

    accepted_batch_store(team=team, token=None, decoded=decode_otlp_protobuf(encode(spans)))


def test_a_drain_takes_the_root_then_the_earliest_spans_while_they_fit(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_TRACE_BYTES = 100_000
    _store(world.team, [_heavy(i, size=32_000) for i in (5, 4, 3, 2)])
    _store(world.team, [_heavy(ROOT, None, size=32_000)])

    drain()

    trace = Trace.objects.get()
    assert stored_span_ids(trace=trace) == {i.to_bytes(8) for i in (ROOT, 2, 3)}
    assert (trace.span_count, trace.spans_dropped) == (3, 2)
    assert trace.byte_count <= 100_000
    assert 64_000 < trace.bytes_dropped < 66_000


def test_compressible_attributes_are_counted_as_a_reader_holds_them(world: TeamWorld) -> None:
    _store(world.team, [_heavy(ROOT, None, size=320_000)])

    drain()

    trace = Trace.objects.get()
    # Stored compressed, a few kilobytes; loaded, the whole 320 KB.
    assert trace.byte_count >= 320_000
    assert abs(trace.byte_count - _stored_bytes(trace)) < 1_000


def test_spans_sent_again_to_a_full_trace_are_neither_refused_nor_counted_twice(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_SPANS_PER_TRACE = 3
    first = [span(ROOT, None, T0, T0 + 100 * MS), span(2, ROOT), span(3, ROOT)]
    _store(world.team, first)
    drain()
    _store(world.team, first)  # an exporter's retry of a request that was committed
    _store(world.team, [span(4, ROOT)])

    drain()

    trace = Trace.objects.get()
    assert (trace.span_count, trace.spans_dropped) == (3, 1)
