"""Requests to the ingestion endpoints, bodies to send, and what must not be left behind."""

import gzip
import json
import time
import zlib
from typing import Any

from django.db import connection
from django.test import Client
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from apps.ingest.decoding import SpanRecord
from apps.ingest.models import Encoding, RawBatch, Trace
from apps.ingest.services.batches import DECODERS
from apps.ingest.services.span_rows import (
    COPY_HEADER,
    COPY_TRAILER,
    KIND_CODES,
    STAGING_COLUMNS,
    STATUS_CODES,
    events_json,
)
from apps.teams.models import Team
from apps.teams.services import ingest_token_create
from tests.builders.spans import T0, TRACE_ID, HandSpan, encode, span
from tests.builders.stored_spans import stored_spans
from tests.timing import MS

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACE_HEX = f"{TRACE_ID:032x}"


def ingest_token(team: Team, name: str = "collector") -> str:
    _, raw = ingest_token_create(team=team, name=name, created_by=None)
    return raw


def chat_spans(count: int, *, trace_id: int = 0xA1B2C3D4E5F60718293A4B5C6D7E8F90) -> list[HandSpan]:
    """A 1 s server span and ``count - 1`` children of a millisecond each."""
    root = span(1, None, T0, T0 + 1000 * MS, name="POST /chat", kind="server", trace_id=trace_id)
    children = [
        span(i + 2, 1, T0 + i, T0 + i + MS, name=f"step {i}", trace_id=trace_id)
        for i in range(count - 1)
    ]
    return [root, *children]


def protobuf_batch(count: int = 3, **kwargs: Any) -> bytes:
    return encode(chat_spans(count, **kwargs))


def otlp_json_batch(*spans: dict[str, Any], service: str = "chat-api") -> bytes:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": list(spans)}]}]}
    return json.dumps(body).encode()


def otlp_json_span(span_id: str, name: str = "op", **fields: Any) -> dict[str, Any]:
    span = {
        "traceId": TRACE_HEX,
        "spanId": span_id,
        "name": name,
        "kind": 2,
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": T0 + 5 * MS,  # int64 as a number here, as a string above
    }
    span.update(fields)
    return span


def native_batch(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resource": {"service.name": "chat-api"}, "spans": list(spans)}).encode()


def native_span(span_id: str, name: str = "op", **fields: Any) -> dict[str, Any]:
    span = {
        "trace_id": TRACE_HEX,
        "span_id": span_id,
        "name": name,
        "start": "2025-10-09T08:53:20Z",
        "end": "2025-10-09T08:53:20.250Z",
    }
    span.update(fields)
    return span


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body)


def gzip_bomb(expanded: int, chunk: int = 1 << 20) -> bytes:
    """A gzip body that inflates to ``expanded`` zero bytes, built without holding them."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(chunk)
    parts = []
    for _ in range(expanded // chunk):
        parts.append(compressor.compress(zeros))
    parts.append(compressor.flush())
    return b"".join(parts)


def post(
    path: str,
    body: bytes,
    *,
    content_type: str = PROTOBUF,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    environ: dict[str, Any] | None = None,
    client: Client | None = None,
) -> Any:
    """``environ`` overrides WSGI variables such as CONTENT_LENGTH or wsgi.input."""
    headers = dict(headers or {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    # Set explicitly: the test client leaves Content-Type out when the body is empty.
    extra = {"CONTENT_TYPE": content_type, **(environ or {})}
    return (client or Client()).post(
        path, body, content_type=content_type, headers=headers, **extra
    )


def status_of(response: Any) -> tuple[int, str]:
    """The google.rpc.Status of an OTLP error response, in whichever encoding it came."""
    if response["Content-Type"] == PROTOBUF:
        status = Status.FromString(response.content)
        return status.code, status.message
    body = json.loads(response.content)
    return body["code"], body["message"]


def export_response(response: Any) -> ExportTraceServiceResponse:
    assert response["Content-Type"] == PROTOBUF
    return ExportTraceServiceResponse.FromString(response.content)


def assert_nothing_written() -> None:
    assert not RawBatch.objects.exists()
    assert not stored_spans()
    assert not Trace.objects.exists()


# The fields a stored batch is compared on: everything a span row keeps.
_BATCH_FIELDS = (
    "trace_id", "span_id", "parent_span_id", "start_ns", "end_ns", "name", "service", "kind",
    "status", "status_message", "scope_name", "attributes", "events",
)  # fmt: skip


def batch_spans(batch: RawBatch) -> list[tuple[Any, ...]]:
    """The spans a stored batch holds, sorted; span rows are read back by PostgreSQL itself."""
    if batch.encoding != Encoding.SPAN_ROWS:
        spans = DECODERS[batch.encoding](bytes(batch.body)).spans
        return expected_spans(spans)
    columns = ", ".join(f"{name} {sql_type}" for name, sql_type in STAGING_COLUMNS)
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        cursor.execute(f"CREATE TEMP TABLE batch_rows ({columns})")
        try:
            with cursor.copy("COPY batch_rows FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(COPY_HEADER + bytes(batch.body) + COPY_TRAILER)
            # jsonb as text: Django's connection leaves JSON decoding to the fields.
            fields = ", ".join(
                f"{f}::text" if f in ("attributes", "events") else f for f in _BATCH_FIELDS
            )
            cursor.execute(f"SELECT team_id, {fields} FROM batch_rows")
            rows = [
                (*row[:-2], json.loads(row[-2]), json.loads(row[-1])) for row in cursor.fetchall()
            ]
        finally:
            cursor.execute("DROP TABLE batch_rows")
    assert {row[0] for row in rows} == {batch.team_id}
    return sorted(
        tuple(bytes(v) if isinstance(v, memoryview) else v for v in row[1:]) for row in rows
    )


def expected_spans(records: list[SpanRecord]) -> list[tuple[Any, ...]]:
    """Decoded records as ``batch_spans`` shows them."""
    return sorted(
        (
            r.trace_id, r.span_id, r.parent_span_id, r.start_ns, r.end_ns, r.name, r.service,
            KIND_CODES[r.kind], STATUS_CODES[r.status], r.status_message, r.scope_name,
            r.attributes, events_json(r),
        )
        for r in records
    )  # fmt: skip


def body_spans(body: bytes, encoding: int) -> list[tuple[Any, ...]]:
    """What a stored batch must hold for an accepted (decompressed) body."""
    return expected_spans(DECODERS[encoding](body).spans)


def rate_window_fresh(seconds_needed: float = 2.0) -> None:
    """Wait for the next rate window when the current one ends within ``seconds_needed``.

    A test that spends a window's allowance and then expects a refusal would see the
    allowance renewed if a window boundary fell between its requests.
    """
    from apps.ingest.ratelimit import WINDOW_S

    left = WINDOW_S - time.time() % WINDOW_S
    if left < seconds_needed:
        time.sleep(left + 0.05)
