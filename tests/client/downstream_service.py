"""A downstream service using the client, run as its own process by the tests.

``python downstream_service.py``: serves on a free loopback port, printed on the first
line of its output. ``GET /?pipeline=P`` extracts the caller's W3C context (trace context
and baggage) from the headers, opens ``budgets.request(P)`` under it and answers, in
JSON, what the request saw: ``remaining_ms``, ``inherited``, ``deadline_unix_ms``, its
span's trace id and parent span id, and the baggage it would pass on.

Its pipelines: ``downstream`` has no deadline of its own, ``tight`` one of 300 ms,
``loose`` one of 60 s; ``eager`` no deadline and a holdout of 100 %: every request it
starts itself is in the holdout.
"""

import json
import math
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from latency_budgets import Budgets
from opentelemetry import baggage, context, propagate
from opentelemetry.sdk.trace import TracerProvider


def document(pipeline: str, deadline_ms: float | None, holdout: float = 0) -> dict[str, Any]:
    return {
        "version": 1,
        "pipeline": pipeline,
        "deadline_ms": deadline_ms,
        "budget": {},
        "objective": None,
        "observed": {"count": 0},
        "stages": [],
        "holdout_percent": holdout,
        "refresh_s": 30,
    }


provider = TracerProvider()
budgets = Budgets.from_documents(
    [
        document("downstream", None),
        document("tight", 300),
        document("loose", 60_000),
        document("eager", None, holdout=100),
    ],
    tracer_provider=provider,
)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query)
        pipeline = query.get("pipeline", ["downstream"])[0]
        # The headers as they came: names are case-insensitive (urllib sends "Baggage").
        token = context.attach(propagate.extract(self.headers))
        try:
            with budgets.request(pipeline) as req:
                remaining = req.remaining_ms
                span = req.span
                assert span is not None
                parent = getattr(span, "parent", None)
                answer = {
                    "remaining_ms": remaining if math.isfinite(remaining) else None,
                    "inherited": req.inherited,
                    "deadline_unix_ms": req.deadline_unix_ms,
                    "trace_id": f"{span.get_span_context().trace_id:032x}",
                    "parent_span_id": None if parent is None else f"{parent.span_id:016x}",
                    "baggage": baggage.get_baggage("latency_budget.deadline"),
                    "holdout": req.holdout,
                    "holdout_baggage": baggage.get_baggage("latency_budget.holdout"),
                }
        finally:
            context.detach(token)
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
