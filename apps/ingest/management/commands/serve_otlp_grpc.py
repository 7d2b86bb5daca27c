"""``manage.py serve_otlp_grpc``: the OTLP/gRPC ingest process (``docs/ingestion.md``)."""

import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from apps.ingest.otlp_grpc import otlp_grpc_server

# Calls under way when asked to stop get this long to commit and answer.
GRACE_S = 10.0


class Command(BaseCommand):
    help = "Serve OTLP/gRPC trace export (TraceService/Export) until SIGTERM or Ctrl-C."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=None, help="Default: OTLP_GRPC_HOST.")
        parser.add_argument("--port", type=int, default=None, help="Default: OTLP_GRPC_PORT.")

    def handle(self, *args: Any, **options: Any) -> None:
        host = options["host"] or settings.OTLP_GRPC_HOST
        port = settings.OTLP_GRPC_PORT if options["port"] is None else options["port"]
        server = otlp_grpc_server(
            address=f"{host}:{port}",
            threads=settings.OTLP_GRPC_THREADS,
            max_concurrent=settings.OTLP_GRPC_MAX_CONCURRENT,
        )
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        server.start()
        scheme = "TLS" if settings.OTLP_GRPC_TLS_CERT_FILE else "plaintext"
        # The first line names the port: a caller that asked for port 0 reads it here.
        self.stdout.write(f"OTLP/gRPC listening on {host}:{server.port} ({scheme})", ending="\n")
        self.stdout.flush()
        stop.wait()
        server.stop(GRACE_S)
