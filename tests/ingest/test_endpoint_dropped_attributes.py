"""Both endpoints accept a span whose numbers analysis cannot use, store it without
them, and say what they dropped: OTLP in partial_success, native JSON in errors."""

import json

import pytest

from apps.ingest.decoding.numeric import DROPPED_ATTRIBUTES
from apps.ingest.services.batches import raw_batches_drain
from tests.builders import spans as traces
from tests.builders.stored_spans import StoredSpan, stored_span
from tests.ingest.endpoint_helpers import (
    JSON,
    export_response,
    native_batch,
    native_span,
    otlp_json_batch,
    otlp_json_span,
    post,
)

TTFC = "gen_ai.response.time_to_first_chunk"
LLM_ID = "2222222222222222"

pytestmark = pytest.mark.usefixtures("clean_cache")


def stored_llm_span() -> StoredSpan:
    raw_batches_drain()
    return stored_span(bytes.fromhex(LLM_ID))


def test_otlp_protobuf_keeps_the_span_and_reports_the_dropped_double(token: str) -> None:
    spans = [
        traces.span(0x1111111111111111, name="POST /chat"),
        traces.span(
            int(LLM_ID, 16),
            0x1111111111111111,
            name="chat gpt-4o",
            attributes={TTFC: 1e300, "gen_ai.request.model": "gpt-4o"},
        ),
    ]

    response = post("/v1/traces", traces.encode(spans), token=token)

    assert response.status_code == 200
    partial = export_response(response).partial_success
    assert partial.rejected_spans == 0
    assert partial.error_message == f"dropped 1 attribute: {TTFC} out of range (1)"
    span = stored_llm_span()
    assert span.name == "chat gpt-4o"
    assert span.parent_span_id == bytes.fromhex("1111111111111111")
    assert span.attributes == {
        "gen_ai.request.model": "gpt-4o",
        DROPPED_ATTRIBUTES: [f"{TTFC}: out of range (1e+300)"],
    }


def test_otlp_json_keeps_the_span_and_reports_the_dropped_string(token: str) -> None:
    attributes = [
        {"key": TTFC, "value": {"stringValue": "1e300"}},
        {"key": "gen_ai.usage.output_tokens", "value": {"doubleValue": 1e30}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
    ]
    body = otlp_json_batch(otlp_json_span(LLM_ID, "chat gpt-4o", attributes=attributes))

    response = post("/v1/traces", body, content_type=JSON, token=token)

    assert response.status_code == 200
    assert json.loads(response.content) == {
        "partialSuccess": {
            "errorMessage": f"dropped 2 attributes: {TTFC} out of range (1), "
            "gen_ai.usage.output_tokens out of range (1)"
        }
    }
    span = stored_llm_span()
    assert span.name == "chat gpt-4o"
    assert span.attributes == {
        "gen_ai.usage.input_tokens": 12,
        DROPPED_ATTRIBUTES: [
            f"{TTFC}: out of range (1e300)",
            "gen_ai.usage.output_tokens: out of range (1e+30)",
        ],
    }


def test_native_json_keeps_the_span_and_lists_the_dropped_integer(token: str) -> None:
    body = native_batch(
        native_span(LLM_ID, "chat gpt-4o", attributes={TTFC: 10**400, "stream": True})
    )

    response = post("/api/v1/spans", body, content_type=JSON, token=token)

    assert response.status_code == 200
    [error] = response.json()["errors"]
    assert error.startswith(f"span 0: dropped {TTFC}: integer outside 64-bit range (1000")
    assert response.json()["accepted"] == 1
    assert response.json()["rejected"] == 0
    span = stored_llm_span()
    assert span.service == "chat-api"
    assert TTFC not in span.attributes
    assert span.attributes["stream"] is True
    [note] = span.attributes[DROPPED_ATTRIBUTES]
    assert note.startswith(f"{TTFC}: integer outside 64-bit range (1000")
