import json

import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from apps.ingest.decoding import (
    RpcCode,
    export_response_json,
    export_response_protobuf,
    status_json,
    status_protobuf,
)


def test_full_success_leaves_partial_success_unset() -> None:
    response = ExportTraceServiceResponse.FromString(export_response_protobuf())

    assert not response.HasField("partial_success")
    assert json.loads(export_response_json()) == {}


def test_partial_success_carries_the_rejected_count_and_message() -> None:
    body = export_response_protobuf(rejected_spans=3, error_message="rejected 3 spans: empty name")

    response = ExportTraceServiceResponse.FromString(body)

    assert response.partial_success.rejected_spans == 3
    assert response.partial_success.error_message == "rejected 3 spans: empty name"


def test_partial_success_in_json_writes_int64_as_a_string() -> None:
    body = export_response_json(rejected_spans=2**40, error_message="too old")

    assert json.loads(body) == {
        "partialSuccess": {"rejectedSpans": str(2**40), "errorMessage": "too old"}
    }


def test_a_warning_without_rejections_omits_the_zero_count() -> None:
    assert json.loads(export_response_json(error_message="slow down")) == {
        "partialSuccess": {"errorMessage": "slow down"}
    }
    response = ExportTraceServiceResponse.FromString(
        export_response_protobuf(error_message="slow down")
    )
    assert response.HasField("partial_success")
    assert response.partial_success.rejected_spans == 0


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (RpcCode.INVALID_ARGUMENT, "malformed JSON: Input data was truncated"),
        (RpcCode.RESOURCE_EXHAUSTED, "x" * 300),  # two-byte length prefix
        (RpcCode.UNAUTHENTICATED, "naïve token ☃"),
        (RpcCode.OK, ""),
        (-1, "negative codes are ten-byte varints"),
    ],
)
def test_status_protobuf_decodes_as_google_rpc_status(code: int, message: str) -> None:
    status = Status.FromString(status_protobuf(code, message))

    assert (status.code, status.message) == (code, message)
    assert list(status.details) == []


def test_status_json_has_code_and_message() -> None:
    assert json.loads(status_json(RpcCode.INVALID_ARGUMENT, "bad")) == {"code": 3, "message": "bad"}
