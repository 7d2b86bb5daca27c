"""OTLP/gRPC ingest (``TraceService/Export``): the official gRPC exporter delivers SDK
spans as the HTTP path stores them, and every refusal of the HTTP path has its gRPC
answer, RetryInfo on exactly the retryable ones. The server is the real gRPC server on a
loopback port, served by its own threads (hence transactional tests)."""

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import SpanExportResult

from apps.ingest.models import Encoding, RawBatch
from apps.ingest.otlp_grpc import otlp_grpc_server
from apps.ingest.services.batches import raw_batch_store
from apps.teams.services import api_token_create, ingest_token_revoke
from tests.builders.spans import sdk_span
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import (
    assert_nothing_written,
    batch_spans,
    body_spans,
    chat_spans,
    ingest_token,
    post,
    protobuf_batch,
    rate_window_fresh,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_cache")]
OTLP_PATH = "/v1/traces"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def port() -> Iterator[int]:
    server = otlp_grpc_server(address="127.0.0.1:0", threads=4, max_concurrent=16)
    server.start()
    try:
        yield server.port
    finally:
        server.stop(None)


def call(
    port: int,
    body: bytes,
    *,
    token: str | None = None,
    metadata: list[tuple[str, str]] | None = None,
    gzip: bool = False,
    method: str = EXPORT,
) -> tuple[grpc.StatusCode, Any]:
    """One raw call with ``body`` as the message: its code, and the answer or the error."""
    pairs = list(metadata or [])
    if token is not None:
        pairs.append(("authorization", f"Bearer {token}"))
    with grpc.insecure_channel(
        f"127.0.0.1:{port}",
        options=[("grpc.max_send_message_length", 64 * 1024 * 1024)],
        compression=grpc.Compression.Gzip if gzip else None,
    ) as channel:
        stub = channel.unary_unary(method)
        try:
            answer = stub(body, metadata=pairs, timeout=30)
        except grpc.RpcError as error:
            return error.code(), error
    return grpc.StatusCode.OK, ExportTraceServiceResponse.FromString(answer)


def retry_after(error: Any) -> int | None:
    """The RetryInfo delay of a refusal, in seconds; None without one."""
    status = rpc_status.from_call(error)
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return int(info.retry_delay.seconds)
    return None


# --- The official exporter -----------------------------------------------------------


@pytest.mark.parametrize("gzip", [False, True])
def test_the_official_grpc_exporter_delivers_what_the_http_path_stores(
    port: int, world: TeamWorld, gzip: bool
) -> None:
    token = ingest_token(world.team)
    exporter = OTLPSpanExporter(
        endpoint=f"127.0.0.1:{port}",
        insecure=True,
        headers={"authorization": f"Bearer {token}"},
        compression=grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression,
        timeout=10,
    )
    spans = chat_spans(6)
    result = exporter.export([sdk_span(s) for s in spans])
    exporter.shutdown()
    assert result == SpanExportResult.SUCCESS
    over_grpc = RawBatch.objects.get()
    assert (over_grpc.team, over_grpc.span_count) == (world.team, 6)
    stored = batch_spans(over_grpc)
    # The same spans sent over OTLP/HTTP are stored alike, row for row.
    over_grpc.delete()
    assert post(OTLP_PATH, protobuf_batch(6), token=token).status_code == 200
    assert sorted(stored) == sorted(batch_spans(RawBatch.objects.get()))
    assert sorted(stored) == sorted(body_spans(protobuf_batch(6), Encoding.OTLP_PROTOBUF))


def test_a_call_is_answered_only_once_its_batch_is_committed(port: int, world: TeamWorld) -> None:
    code, answer = call(port, protobuf_batch(4), token=ingest_token(world.team))
    assert code == grpc.StatusCode.OK
    assert not answer.HasField("partial_success")
    # Another connection (the test's) sees it the moment the answer arrived.
    assert RawBatch.objects.get().span_count == 4


def test_spans_the_decoder_rejects_come_back_as_partial_success(
    port: int, world: TeamWorld
) -> None:
    request = ExportTraceServiceRequest.FromString(protobuf_batch(3))
    request.resource_spans[0].scope_spans[0].spans[1].span_id = b"short"
    body = request.SerializeToString()
    code, answer = call(port, body, token=ingest_token(world.team))
    assert code == grpc.StatusCode.OK
    assert answer.partial_success.rejected_spans == 1
    assert answer.partial_success.error_message
    assert RawBatch.objects.get().span_count == 2


# --- Refusals, as the HTTP path's --------------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [
        [],
        [("authorization", "Bearer lbi_nothing_of_the_kind_000000000000")],
        [("authorization", "Basic dXNlcjpwYXNz")],
        [("authorization", "Bearer")],
    ],
)
def test_without_a_valid_ingest_token_the_call_is_unauthenticated(
    port: int, world: TeamWorld, metadata: list[tuple[str, str]]
) -> None:
    code, error = call(port, protobuf_batch(2), metadata=metadata)
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert "ingest token" in error.details()
    assert retry_after(error) is None
    assert_nothing_written()


def test_a_revoked_token_and_a_personal_api_token_are_refused(port: int, world: TeamWorld) -> None:
    from apps.teams.models import IngestToken

    raw = ingest_token(world.team, "old")
    ingest_token_revoke(token=IngestToken.objects.get(name="old"))
    assert call(port, protobuf_batch(2), token=raw)[0] == grpc.StatusCode.UNAUTHENTICATED
    _, api_raw = api_token_create(user=world.owner, name="cli")
    code, error = call(port, protobuf_batch(2), token=api_raw)
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert "personal API token" in error.details()
    assert_nothing_written()


@pytest.mark.parametrize("body", [b"\xff\xff\xff\xff", b"\x0a\x05\x0a\x03\x0a\x01"])
def test_a_message_that_is_not_otlp_is_an_invalid_argument(
    port: int, world: TeamWorld, body: bytes
) -> None:
    code, error = call(port, body, token=ingest_token(world.team))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert retry_after(error) is None
    assert_nothing_written()


def test_a_message_past_the_decompressed_limit_is_refused_unread(
    port: int, world: TeamWorld, settings: Any
) -> None:
    settings.INGEST_MAX_DECOMPRESSED_BYTES = 64 * 1024
    # The limit is read when the server is built: build one for this limit.
    server = otlp_grpc_server(address="127.0.0.1:0", threads=2, max_concurrent=4)
    bound = server.port
    server.start()
    try:
        big = protobuf_batch(1) + b"\x00" * (128 * 1024)
        code, error = call(bound, big, token=ingest_token(world.team))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert retry_after(error) is None
        # Eight megabytes of zeros sent gzip-compressed (a few kilobytes on the wire),
        # past the limit once inflated: refused the same way.
        code, _ = call(
            bound, bytes(8 * 1024 * 1024), token=ingest_token(world.team, "b"), gzip=True
        )
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        server.stop(None)
    assert_nothing_written()


def test_an_account_over_its_rate_is_told_when_to_come_back(
    port: int, world: TeamWorld, settings: Any
) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1  # five spans per window
    rate_window_fresh()
    token = ingest_token(world.team)
    assert call(port, protobuf_batch(3), token=token)[0] == grpc.StatusCode.OK
    code, error = call(port, protobuf_batch(3), token=token)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "1 spans per second" in error.details()
    assert 1 <= (retry_after(error) or 0) <= 5
    assert RawBatch.objects.get().span_count == 3


def test_an_account_over_its_backlog_is_unavailable_with_retry_info(
    port: int, world: TeamWorld, settings: Any
) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 2
    raw_batch_store(
        team=world.team, token=None, encoding=Encoding.OTLP_PROTOBUF,
        body=protobuf_batch(3), span_count=3,
    )  # fmt: skip
    code, error = call(port, protobuf_batch(2), token=ingest_token(world.team))
    assert code == grpc.StatusCode.UNAVAILABLE
    assert retry_after(error) == 5
    assert RawBatch.objects.count() == 1
    # Another account is not held up by this one's backlog.
    assert call(port, protobuf_batch(2), token=ingest_token(world.other_team))[0] == (
        grpc.StatusCode.OK
    )


def test_each_teams_token_stores_under_its_own_team_only(port: int, world: TeamWorld) -> None:
    assert call(port, protobuf_batch(2), token=ingest_token(world.team))[0] == grpc.StatusCode.OK
    assert call(port, protobuf_batch(3), token=ingest_token(world.other_team))[0] == (
        grpc.StatusCode.OK
    )
    counts = dict(RawBatch.objects.values_list("team_id", "span_count"))
    assert counts == {world.team.pk: 2, world.other_team.pk: 3}


def test_another_method_is_unimplemented(port: int, world: TeamWorld) -> None:
    code, _ = call(
        port,
        protobuf_batch(2),
        token=ingest_token(world.team),
        method="/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
    )
    assert code == grpc.StatusCode.UNIMPLEMENTED
    assert_nothing_written()
