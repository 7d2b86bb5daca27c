"""Stored spans read back through the span store the run keeps them in (PostgreSQL's
table, or ClickHouse with ``--span-store=clickhouse``), never through the ORM: what a
test says of stored spans then holds on either store.

Reads go by trace rows, as every reader of spans does: a span belongs to a trace of the
test's own (on ClickHouse, earlier tests' spans stay, but their trace rows are gone).
States no ingestion makes are made before the spans are stored, never by changing them
there: spans as an older release could have stored them, a trace whose spans aged out.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from apps.analysis.models import StageSample
from apps.ingest.decoding import decode_otlp_protobuf
from apps.ingest.decoding.records import DecodeResult
from apps.ingest.models import RawBatch, Trace
from apps.ingest.services.batches import accepted_batch_store
from apps.ingest.span_store import StoredRow, span_store
from apps.teams.models import Team
from tests.builders.spans import HandSpan, encode


@dataclass(frozen=True)
class StoredSpan:
    """A stored span with its attributes and events decoded."""

    trace_pk: int
    span_id: bytes
    parent_span_id: bytes | None
    name: str
    service: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[dict[str, Any]]
    status: int


def stored_spans(*, team: Team | None = None, trace: Trace | None = None) -> list[StoredRow]:
    """The stored spans of every trace, of ``team``'s traces, or of ``trace``."""
    traces = Trace.objects.all()
    if team is not None:
        traces = traces.filter(team=team)
    if trace is not None:
        traces = traces.filter(pk=trace.pk)
    return span_store().spans_of_traces(list(traces))


def stored_span_ids(*, team: Team | None = None, trace: Trace | None = None) -> set[bytes]:
    return {bytes(row.span_id) for row in stored_spans(team=team, trace=trace)}


def stored_span(span_id: bytes, *, team: Team | None = None) -> StoredSpan:
    """The one stored span with this id."""
    rows = [row for row in stored_spans(team=team) if bytes(row.span_id) == span_id]
    assert len(rows) == 1, f"{len(rows)} stored spans with id {span_id.hex()}"
    [row] = rows
    parent = None if row.parent_span_id is None else bytes(row.parent_span_id)
    return StoredSpan(
        row.trace_pk, bytes(row.span_id), parent, row.name, row.service, row.kind,
        row.start_ns, row.end_ns, json.loads(row.attributes), json.loads(row.events),
        row.status,
    )  # fmt: skip


def trace_without_spans(trace: Trace, *, trace_id: int) -> Trace:
    """A copy of analysed ``trace`` (its row and stage samples) under ``trace_id``, none
    of whose spans are stored: a trace whose spans aged out, on any store."""
    samples = list(StageSample.objects.filter(trace_pk=trace.pk))
    copy = Trace.objects.select_related("pipeline").get(pk=trace.pk)
    copy.pk = None
    copy.trace_id = trace_id.to_bytes(16, "big")
    copy.save()
    for sample in samples:
        sample.trace_pk = copy.pk
    StageSample.objects.bulk_create(samples)
    return copy


def spans_store_unchecked(
    team: Team, spans: Sequence[HandSpan], attributes: Mapping[str, str]
) -> RawBatch:
    """Store ``spans`` as the request path does, except that the spans named in
    ``attributes`` keep the JSON text given there as theirs, unchecked: rows as a release
    that did not check what it decoded could have stored them. A drain then stores them."""
    records = [
        record
        if record.name not in attributes
        else msgspec.structs.replace(
            record, attributes=msgspec.Raw(attributes[record.name].encode())
        )
        for record in decode_otlp_protobuf(encode(spans)).spans
    ]
    return accepted_batch_store(team=team, token=None, decoded=DecodeResult(spans=records))
