"""OTLP/gRPC trace export: the ``TraceService/Export`` method, with the guarantees of
``POST /v1/traces`` (``docs/ingestion.md``).

The request's bytes go to the same intake as an OTLP/HTTP protobuf body: the same
token, rate, quota, backlog and byte budgets, the same decoder and ``partial_success``.
Only the answers differ, mapped as the OTLP specification maps HTTP's to gRPC's: a
refusal the client should retry (throttled, over quota, backlog full, database away)
carries ``google.rpc.RetryInfo`` with the delay, the others none. A success is answered
only once the batch is committed.
"""

import gc
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from django.conf import settings
from django.db import close_old_connections
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from apps.ingest.auth import HOW, SCHEME, Unauthenticated, ingest_token_for_value
from apps.ingest.decoding import export_response_protobuf
from apps.ingest.models import Encoding
from apps.ingest.services.intake import (
    Refusal,
    backlog_check,
    batch_accept,
    database_errors_refused,
)
from apps.teams.authentication import authorization_parts

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
METHOD = "Export"
# HTTP's refusals in gRPC's codes (the OTLP specification's table); RESOURCE_EXHAUSTED
# is retried by exporters only with RetryInfo, which only the retryable ones carry.
_CODES = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    413: code_pb2.RESOURCE_EXHAUSTED,
    415: code_pb2.INVALID_ARGUMENT,
    429: code_pb2.RESOURCE_EXHAUSTED,
    503: code_pb2.UNAVAILABLE,
}


def _bearer(metadata: Sequence[tuple[str, str | bytes]]) -> str:
    values = [value for key, value in metadata if key == "authorization"]
    if not values:
        raise Unauthenticated(f"missing ingest token; {HOW} in the call's metadata")
    value = values[0]
    header = value.decode("latin-1") if isinstance(value, bytes) else value
    parts = authorization_parts(header)
    if len(values) > 1 or len(parts) != 2 or parts[0].lower() != SCHEME.lower():
        raise Unauthenticated(f"malformed authorization metadata; {HOW}")
    return parts[1]


def _status(code: int, message: str, retry_after: int | None) -> grpc.Status:
    details = []
    if retry_after:
        info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=retry_after))
        packed = any_pb2.Any()
        packed.Pack(info)
        details.append(packed)
    return rpc_status.to_status(status_pb2.Status(code=code, message=message, details=details))


def trace_export(request: bytes, context: grpc.ServicerContext) -> bytes:
    """One ``Export`` call: its message as the bytes sent (decoded by our own decoder, so
    its limits and errors are those of the HTTP path)."""
    # A pool thread keeps its database connection between calls, as a web thread does.
    close_old_connections()
    try:
        with database_errors_refused():
            token = ingest_token_for_value(_bearer(context.invocation_metadata()))
            backlog_check(team=token.team)
            result = batch_accept(
                token=token, body=request, content_encoding=None, encoding=Encoding.OTLP_PROTOBUF
            )
    except Unauthenticated as exc:
        context.abort_with_status(_status(code_pb2.UNAUTHENTICATED, exc.message, None))
    except Refusal as refusal:
        code = _CODES.get(refusal.status, code_pb2.INTERNAL)
        context.abort_with_status(_status(code, refusal.message, refusal.retry_after))
    finally:
        close_old_connections()
    return export_response_protobuf(
        rejected_spans=result.rejected, error_message=result.error_message
    )


def _options() -> list[tuple[str, Any]]:
    return [
        # What one message may hold once decompressed: the HTTP path's limit on a
        # decompressed body. gRPC refuses a bigger one with RESOURCE_EXHAUSTED itself.
        ("grpc.max_receive_message_length", settings.INGEST_MAX_DECOMPRESSED_BYTES),
        ("grpc.max_send_message_length", 1024 * 1024),
        ("grpc.so_reuseport", 0),
    ]


class OtlpGrpcServer:
    """The gRPC server and the threads that serve its calls."""

    def __init__(self, server: grpc.Server, pool: ThreadPoolExecutor, port: int) -> None:
        self.server = server
        self.port = port
        self._pool = pool

    def start(self) -> None:
        self.server.start()

    def stop(self, grace_s: float | None) -> None:
        """Refuse new calls, let those under way finish within ``grace_s``, then end the
        threads, whose database connections close with them."""
        self.server.stop(grace_s).wait()
        self._pool.shutdown(wait=True)
        # A thread's connection is its own (thread-local): freed with the thread.
        gc.collect()


def otlp_grpc_server(*, address: str, threads: int, max_concurrent: int) -> OtlpGrpcServer:
    """The server with its port bound (TLS when ``OTLP_GRPC_TLS_CERT_FILE`` is set), not
    yet started; ``address`` may name port 0, and ``.port`` is the port bound."""
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="otlp-grpc")
    server = grpc.server(
        pool,
        options=_options(),
        # Past these calls in flight gRPC answers RESOURCE_EXHAUSTED at once.
        maximum_concurrent_rpcs=max_concurrent,
    )
    # No (de)serializer: the method takes and answers bytes.
    handler = grpc.unary_unary_rpc_method_handler(trace_export)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {METHOD: handler}),)
    )
    cert_file, key_file = settings.OTLP_GRPC_TLS_CERT_FILE, settings.OTLP_GRPC_TLS_KEY_FILE
    if cert_file:
        with open(cert_file, "rb") as cert, open(key_file, "rb") as key:
            credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    if not port:
        raise OSError(f"could not bind {address}")
    return OtlpGrpcServer(server, pool, port)
