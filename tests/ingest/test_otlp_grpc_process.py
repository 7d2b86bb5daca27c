"""``manage.py serve_otlp_grpc`` as its own process, as the Procfile runs it: the
official exporter delivers to it in plaintext and, with a certificate configured, over
TLS; SIGTERM stops it cleanly."""

import ipaddress
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from apps.ingest.models import RawBatch
from tests.builders.spans import sdk_span
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import chat_spans, ingest_token
from tests.processes import free_port, process_env, running, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_cache")]


@contextmanager
def serving(tmp_path: Path, **env: str) -> Iterator[int]:
    port = free_port()
    log = tmp_path / "grpc.log"
    command = [sys.executable, "manage.py", "serve_otlp_grpc", "--port", str(port)]
    with running(command, log_path=log, env=process_env(**env)) as process:
        assert wait_for(lambda: "listening" in log.read_text(), timeout=30), log.read_text()
        yield port
        process.terminate()
        assert process.wait(timeout=20) == 0, log.read_text()


def send(port: int, token: str, **kwargs: object) -> SpanExportResult:
    exporter = OTLPSpanExporter(
        endpoint=f"127.0.0.1:{port}", headers={"authorization": f"Bearer {token}"},
        timeout=10, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    try:
        return exporter.export([sdk_span(s) for s in chat_spans(5)])
    finally:
        exporter.shutdown()


def test_the_process_takes_spans_and_stops_on_sigterm(tmp_path: Path, world: TeamWorld) -> None:
    with serving(tmp_path) as port:
        result = send(port, ingest_token(world.team), insecure=True)
    assert result == SpanExportResult.SUCCESS
    assert RawBatch.objects.get().span_count == 5
    assert "plaintext" in (tmp_path / "grpc.log").read_text()


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_with_a_certificate_the_port_speaks_tls_only(tmp_path: Path, world: TeamWorld) -> None:
    cert, key = self_signed(tmp_path)
    env = {"OTLP_GRPC_TLS_CERT_FILE": str(cert), "OTLP_GRPC_TLS_KEY_FILE": str(key)}
    token = ingest_token(world.team)
    with serving(tmp_path, **env) as port:
        trusted = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        assert send(port, token, credentials=trusted) == SpanExportResult.SUCCESS
        # A plaintext client gets nothing through.
        assert send(port, token, insecure=True) == SpanExportResult.FAILURE
    assert RawBatch.objects.get().span_count == 5
    assert "(TLS)" in (tmp_path / "grpc.log").read_text()
