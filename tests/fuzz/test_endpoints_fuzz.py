"""The ingestion endpoints, end to end through Django: whatever is posted with a valid
token, the answer is never a 5xx, is a well-formed OTLP or API answer, and a 2xx means
the accepted spans are committed as a raw batch."""

import gzip
import json
import zlib
from typing import Any

import pytest
from django.conf import settings
from django.db.models import Max, Sum
from django.test import Client
from google.protobuf.json_format import MessageToDict
from google.rpc.status_pb2 import Status
from hypothesis import event, given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from apps.ingest.decoding import IngestError, decode_native, decode_otlp, otlp_encoding
from apps.ingest.decoding.records import KINDS, STATUSES
from apps.ingest.models import RawBatch
from tests.conftest import TeamWorld
from tests.fuzz.conftest import FUZZ
from tests.fuzz.json_bodies import json_values, native_documents, otlp_json_documents
from tests.fuzz.mutations import mutated
from tests.fuzz.protobuf_bodies import export_requests, valid_spans
from tests.ingest.endpoint_helpers import ingest_token

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("clean_cache")]

PROTOBUF_TYPES = ["application/x-protobuf", "application/protobuf", "APPLICATION/X-PROTOBUF"]
JSON_TYPES = ["application/json", "application/json; charset=utf-8"]
OTHER_TYPES = ["text/plain", "", "application/x-www-form-urlencoded", "multipart/form-data"]
# Mostly what the endpoints take, so that most requests get as far as decoding.
otlp_types = st.sampled_from(3 * PROTOBUF_TYPES + 3 * JSON_TYPES + OTHER_TYPES)
native_types = st.sampled_from(5 * JSON_TYPES + OTHER_TYPES)


@pytest.fixture
def token(world: TeamWorld) -> str:
    return ingest_token(world.team)


def _encoded(body: bytes, coding: str) -> bytes:
    if coding == "gzip":
        return gzip.compress(body)
    if coding == "deflate":
        return zlib.compress(body)
    if coding == "gzip (truncated)":
        return gzip.compress(body)[: max(len(body) // 2, 1)]
    return body


codings = st.sampled_from(["", "", "gzip", "gzip", "identity", "deflate", "gzip (truncated)", "br"])


def _json_bytes(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode()


valid_requests = st.lists(valid_spans(), min_size=1, max_size=5).map(
    lambda spans: ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    )
)


def _native_span(span: Span) -> dict[str, Any]:
    native = {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "name": span.name,
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "kind": KINDS[span.kind],
        "status": STATUSES[span.status.code],
    }
    if span.parent_span_id:
        native["parent_id"] = span.parent_span_id.hex()
    return native


protobuf_bodies = st.one_of(
    valid_requests.map(ExportTraceServiceRequest.SerializeToString),
    export_requests().map(lambda drawn: drawn[0].SerializeToString()),
    st.binary(max_size=500),
)
otlp_json_bodies = st.one_of(
    # The proto3 JSON mapping as protobuf writes it: base64 ids, int64 as strings.
    valid_requests.map(lambda request: _json_bytes(MessageToDict(request))),
    otlp_json_documents().map(lambda drawn: _json_bytes(drawn[0])),
    mutated(otlp_json_documents().map(lambda drawn: drawn[0])).map(_json_bytes),
    json_values.map(_json_bytes),
    st.binary(max_size=300),
)
native_bodies = st.one_of(
    st.lists(valid_spans(), min_size=1, max_size=5).map(
        lambda spans: _json_bytes({"spans": [_native_span(span) for span in spans]})
    ),
    native_documents().map(lambda drawn: _json_bytes(drawn[0])),
    mutated(native_documents().map(lambda drawn: drawn[0])).map(_json_bytes),
    json_values.map(_json_bytes),
    st.binary(max_size=300),
)


def _last_batch() -> int:
    return RawBatch.objects.aggregate(last=Max("pk"))["last"] or 0


def _stored_since(last: int) -> tuple[int, int]:
    """Raw batches committed since ``last``, and the spans they hold."""
    new = RawBatch.objects.filter(pk__gt=last)
    return new.count(), new.aggregate(spans=Sum("span_count"))["spans"] or 0


def _expected_spans(decode: Any, body: bytes, coding: str, **kwargs: Any) -> int | None:
    """What the decoder itself accepts from this body: None when it refuses it."""
    try:
        result = decode(
            body,
            content_encoding=coding or None,
            max_size=settings.INGEST_MAX_DECOMPRESSED_BYTES,
            **kwargs,
        )
    except IngestError:
        return None
    return len(result.spans)


def _post(path: str, body: bytes, content_type: str, coding: str, token: str) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    if coding:
        headers["Content-Encoding"] = coding
    # Set explicitly: the test client leaves Content-Type out when the body is empty.
    return Client().post(
        path, body, content_type=content_type, headers=headers, CONTENT_TYPE=content_type
    )


def _otlp_answer_check(response: Any, protobuf: bool) -> tuple[int, str]:
    """The answer decodes as OTLP says it must; returns its rejected count and message."""
    assert response.status_code < 500
    media_type = response["Content-Type"].split(";")[0]
    ok = response.status_code == 200
    if protobuf and (ok or media_type == "application/x-protobuf"):
        if ok:
            export = ExportTraceServiceResponse.FromString(response.content)
            partial = export.partial_success
            return partial.rejected_spans, partial.error_message
        status = Status.FromString(response.content)
        assert status.code != 0
        return -1, status.message
    assert media_type == "application/json"
    body = response.json()
    assert isinstance(body, dict)
    if ok:
        assert set(body) <= {"partialSuccess"}
        partial = body.get("partialSuccess", {})
        assert set(partial) <= {"rejectedSpans", "errorMessage"}
        return int(partial.get("rejectedSpans", "0")), partial.get("errorMessage", "")
    assert set(body) == {"code", "message"}
    assert isinstance(body["code"], int)
    assert body["code"] != 0
    return -1, body["message"]


@FUZZ
@given(
    data=st.data(),
    content_type=otlp_types,
    coding=codings,
)
def test_otlp_traces_never_fail_and_a_200_means_the_spans_are_stored(
    token: str, data: st.DataObject, content_type: str, coding: str
) -> None:
    protobuf = content_type.lower().startswith("application/x-protobuf") or (
        content_type == "application/protobuf"
    )
    raw = data.draw(protobuf_bodies if protobuf else otlp_json_bodies)
    body = _encoded(raw, coding)
    last = _last_batch()

    response = _post("/v1/traces", body, content_type, coding, token)

    _otlp_answer_check(response, protobuf)
    event(f"status {response.status_code}")
    batches, spans = _stored_since(last)
    if response.status_code != 200:
        assert batches == 0
        return
    expected = _expected_spans(decode_otlp, body, coding, encoding=otlp_encoding(content_type))
    assert expected is not None
    assert spans == expected
    assert batches == (1 if expected else 0)
    event("spans stored" if spans else "no span stored")


@FUZZ
@given(body=native_bodies, content_type=native_types, coding=codings)
def test_native_spans_never_fail_and_a_200_means_the_spans_are_stored(
    token: str, body: bytes, content_type: str, coding: str
) -> None:
    sent = _encoded(body, coding)
    last = _last_batch()

    response = _post("/api/v1/spans", sent, content_type, coding, token)

    assert response.status_code < 500
    assert response["Content-Type"].split(";")[0] == "application/json"
    answer = response.json()
    event(f"status {response.status_code}")
    batches, spans = _stored_since(last)
    if response.status_code != 200:
        assert set(answer) == {"error"}
        assert {"code", "message"} <= set(answer["error"])
        assert batches == 0
        return
    assert set(answer) == {"accepted", "rejected", "errors"}
    assert answer["accepted"] == spans
    assert answer["accepted"] == _expected_spans(decode_native, sent, coding)
    assert batches == (1 if spans else 0)
    event("spans stored" if spans else "no span stored")
