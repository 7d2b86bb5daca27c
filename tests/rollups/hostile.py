"""Traces of a hostile team beside a victim team's, stored through ingestion."""

from datetime import timedelta
from typing import Any

from django.utils import timezone

from apps.ingest.models import Encoding, Trace
from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
from apps.pipelines.models import Pipeline, Stage
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.spans import HandSpan, encode, retrieval_request, span
from tests.builders.stored_spans import spans_store_unchecked
from tests.timing import MS, S


def rag_pipeline(team: Team) -> tuple[Pipeline, Stage]:
    pipeline = make_pipeline(team, "rag-chat", match_root_span="POST /chat")
    retrieval = make_stage(pipeline, "retrieval", budget_ms=350)
    make_rule(retrieval, span_name="retrieve*")
    return pipeline, retrieval


def recent_ns(seconds_ago: int = 30) -> int:
    return (int(timezone.now().timestamp()) - seconds_ago) * S


def ingest(team: Team, spans: list[HandSpan]) -> None:
    """Store spans the way a request does, then drain them into traces."""
    raw_batch_store(
        team=team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
        span_count=len(spans),
    )  # fmt: skip
    raw_batches_drain()


def chat_requests(team: Team, *, first_id: int, count: int, retrieval_ms: int = 200) -> list[int]:
    """``count`` two-span requests of the last half minute; their trace ids."""
    spans = []
    for trace_id in range(first_id, first_id + count):
        t0 = recent_ns(30) + (trace_id - first_id) * MS
        spans += retrieval_request(trace_id, t0, retrieval_ms=retrieval_ms)
    ingest(team, spans)
    return list(range(first_id, first_id + count))


def one_trace(
    team: Team,
    trace_id: int,
    *,
    child: str,
    attributes: dict[str, Any] | None = None,
    stored_json: str | None = None,
) -> int:
    """A root and its child; ``stored_json`` is stored as the child's attributes as it is,
    as a row stored by an older release could hold them."""
    t0 = recent_ns(20)
    spans = [
        span(0x10, None, t0, t0 + 900 * MS, name="POST /chat", kind="server",
             trace_id=trace_id),
        span(0x20, 0x10, t0, t0 + 800 * MS, name=child, kind="client",
             attributes=attributes, trace_id=trace_id),
    ]  # fmt: skip
    if stored_json is None:
        ingest(team, spans)
    else:
        spans_store_unchecked(team, spans, {child: stored_json})
        raw_batches_drain()
    return trace_id


def wide_trace(team: Team, trace_id: int, *, spans: int) -> int:
    """One root with ``spans`` children: analysis takes a while, and its time grows with it."""
    t0 = recent_ns(20)
    children = [
        span(0x1000 + i, 0x10, t0 + i * 1000, t0 + i * 1000 + MS, name=f"tool call {i}",
             trace_id=trace_id)
        for i in range(spans)
    ]  # fmt: skip
    root = span(0x10, None, t0, t0 + 2 * S, name="POST /chat", kind="server", trace_id=trace_id)
    ingest(team, [root, *children])
    return trace_id


def broken_trace(team: Team, trace_id: int) -> int:
    """A trace whose stored attributes are no mapping, as a damaged row could hold: its
    analysis raises. Due for analysis, in a team with a pipeline that reads it."""
    rag_pipeline(team)
    one_trace(team, trace_id, child="retrieve docs", stored_json="[1, 2, 3]")
    go_quiet()
    return trace_id


def late_span(team: Team, trace_id: int, span_id: int) -> None:
    t0 = recent_ns(10)
    ingest(team, [span(span_id, 0x10, t0, t0 + MS, name="late", trace_id=trace_id)])


def traces_of(team: Team, trace_ids: list[int]) -> list[Trace]:
    ids = [trace_id.to_bytes(16, "big") for trace_id in trace_ids]
    return list(Trace.objects.filter(team=team, trace_id__in=ids).order_by("trace_id"))


def go_quiet() -> None:
    """No span for a minute: every open trace is due for analysis."""
    Trace.objects.update(last_span_at=timezone.now() - timedelta(minutes=1))
