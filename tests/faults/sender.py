"""A client with known totals: OTLP/HTTP protobuf requests whose every span it can name.

The OpenTelemetry exporter retries on its own and reports only a batch's final fate, so
this client sends the OTLP protobuf messages itself and records each request: which
spans it carried, the HTTP status it got (or that no answer came) and whether a refusal
carried Retry-After. A refused or unanswered batch is sent again as the exporter would,
after Retry-After when given, else after a growing pause; a 2xx ends it. So every span
is acknowledged in the end, and the spans acknowledged are known exactly.

Each trace is a ``POST /chat`` root with a 100 ms ``vector.search`` and a 170 ms
``llm.chat`` child. The root of each batch's last trace travels in the next batch, so
that traces also arrive in two requests, the root last, as they may from an SDK.
"""

import heapq
import http.client
import random
import select
import threading
import time
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from apps.core.time import NS_PER_MS

# (trace id, span id), as stored.
SpanKey = tuple[bytes, bytes]
SPANS_PER_TRACE = 3
REQUEST_TIMEOUT_S = 15.0
# The exporter's own cap on a wait it was told; longer is treated as this long.
RETRY_AFTER_CAP_S = 15.0
# gunicorn closes a keep-alive connection idle for 2 s; one idle for longer than this is
# not reused, so that a request never races the server's close of its connection.
IDLE_REUSE_S = 1.0
# Statuses the OTLP specification makes final: retrying cannot help.
FINAL_STATUSES = frozenset({400, 401, 403, 404, 405, 413, 415})


@dataclass(frozen=True)
class Attempt:
    """One POST: its batch, when it left and was answered, and the answer."""

    batch: int
    spans: int
    sent_at: float  # time.time(), comparable with the database's clock on this machine
    answered_at: float
    status: int | None  # None: no answer (refused connection, reset, timeout)
    retry_after: str | None
    rejected_spans: int = 0
    error: str = ""

    @property
    def acknowledged(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(order=True)
class _Due:
    due: float
    number: int
    batch: "Batch" = field(compare=False)


@dataclass
class Batch:
    number: int
    body: bytes
    spans: list[SpanKey]
    created_at: float  # time.time()
    tries: int = 0
    acked: bool = False
    acked_at: float | None = None
    final: bool = False  # refused for good (FINAL_STATUSES)


def _span(
    trace_id: bytes, span_id: int, parent: int | None, name: str, kind: int, start: int, end: int
) -> Span:
    return Span(
        trace_id=trace_id,
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent is not None else b"",
        name=name,
        kind=kind,  # type: ignore[arg-type]  # the generated stubs want the enum wrapper
        start_time_unix_nano=start,
        end_time_unix_nano=end,
    )


class TraceFactory:
    """Fresh trace ids for a run (a random prefix and a serial), spans ending now."""

    def __init__(self) -> None:
        self.prefix = random.getrandbits(63) | 1
        self.serial = 0

    def trace(self) -> tuple[bytes, Span, list[Span]]:
        """A trace's id, its root and its two children."""
        self.serial += 1
        trace_id = ((self.prefix << 64) | self.serial).to_bytes(16, "big")
        base = self.serial * 4
        end = time.time_ns()
        start = end - 300 * NS_PER_MS
        root = _span(trace_id, base + 1, None, "POST /chat", Span.SPAN_KIND_SERVER, start, end)
        children = [
            _span(
                trace_id, base + 2, base + 1, "vector.search", Span.SPAN_KIND_CLIENT,
                start + 10 * NS_PER_MS, start + 110 * NS_PER_MS,
            ),
            _span(
                trace_id, base + 3, base + 1, "llm.chat", Span.SPAN_KIND_CLIENT,
                start + 120 * NS_PER_MS, start + 290 * NS_PER_MS,
            ),
        ]  # fmt: skip
        return trace_id, root, children


def _reusable(conn: http.client.HTTPConnection, *, idle: float) -> bool:
    """Whether a kept-alive connection can take the next request: not idle for long,
    and not readable (a socket readable between requests was closed by the server)."""
    if conn.sock is None:
        return True  # not connected yet: it connects on use
    if idle > IDLE_REUSE_S:
        return False
    readable, _, _ = select.select([conn.sock], [], [], 0)
    return not readable


def export_body(spans: list[Span]) -> bytes:
    service = KeyValue(key="service.name", value=AnyValue(string_value="chat-api"))
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=[service]),
                scope_spans=[ScopeSpans(spans=spans)],
            )
        ]
    )
    return request.SerializeToString()


class KnownTotalsClient:
    """``batches_per_s`` requests of ``traces_per_batch`` traces a second, over ``senders``
    keep-alive connections; ``stop_new()`` ends the traffic, ``finish()`` waits until
    every batch is acknowledged."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        token: str,
        batches_per_s: float = 10.0,
        traces_per_batch: int = 10,
        senders: int = 4,
    ) -> None:
        self.host, self.port, self.token = host, port, token
        self.interval = 1.0 / batches_per_s
        self.traces_per_batch = traces_per_batch
        self.factory = TraceFactory()
        self.batches: list[Batch] = []
        self.attempts: list[Attempt] = []
        self._queue: list[_Due] = []
        self._lock = threading.Condition()
        self._held_root: Span | None = None
        self._stop_new = threading.Event()
        self._closed = threading.Event()
        self._threads = [threading.Thread(target=self._pace, daemon=True)] + [
            threading.Thread(target=self._send_loop, daemon=True) for _ in range(senders)
        ]

    # --- traffic -------------------------------------------------------------------
    def start(self) -> "KnownTotalsClient":
        for thread in self._threads:
            thread.start()
        return self

    def _new_batch(self, *, last: bool = False) -> Batch:
        spans: list[Span] = []
        if self._held_root is not None:
            spans.append(self._held_root)
            self._held_root = None
        for index in range(0 if last else self.traces_per_batch):
            _, root, children = self.factory.trace()
            spans += children
            if index == self.traces_per_batch - 1:
                self._held_root = root
            else:
                spans.append(root)
        batch = Batch(
            number=len(self.batches),
            body=export_body(spans),
            spans=[(s.trace_id, s.span_id) for s in spans],
            created_at=time.time(),
        )
        self.batches.append(batch)
        return batch

    def _enqueue(self, batch: Batch, due: float) -> None:
        with self._lock:
            heapq.heappush(self._queue, _Due(due, batch.number, batch))
            self._lock.notify()

    def _pace(self) -> None:
        due = time.monotonic()
        while not self._stop_new.is_set():
            with self._lock:
                batch = self._new_batch()
            self._enqueue(batch, time.monotonic())
            due += self.interval
            # After a stall, carry on at the rate instead of bursting to catch up.
            due = max(due, time.monotonic() - 1.0)
            self._stop_new.wait(max(0.0, due - time.monotonic()))
        with self._lock:
            last = self._new_batch(last=True) if self._held_root is not None else None
        if last is not None:
            self._enqueue(last, time.monotonic())

    def _next(self) -> Batch | None:
        with self._lock:
            while not self._closed.is_set():
                now = time.monotonic()
                if self._queue and self._queue[0].due <= now:
                    return heapq.heappop(self._queue).batch
                wait = self._queue[0].due - now if self._queue else 0.5
                self._lock.wait(min(wait, 0.5))
        return None

    def _send_loop(self) -> None:
        conn: http.client.HTTPConnection | None = None
        last_used = 0.0
        while (batch := self._next()) is not None:
            if conn is not None and not _reusable(conn, idle=time.monotonic() - last_used):
                conn.close()
                conn = None
            if conn is None:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT_S)
            attempt = self._post(conn, batch)
            last_used = time.monotonic()
            if attempt.status is None:
                conn.close()
                conn = None
            with self._lock:
                self.attempts.append(attempt)
                batch.tries += 1
                if attempt.acknowledged:
                    batch.acked, batch.acked_at = True, attempt.answered_at
                elif attempt.status in FINAL_STATUSES:
                    batch.final = True
                self._lock.notify_all()
            if not (batch.acked or batch.final):
                self._enqueue(batch, time.monotonic() + self._retry_delay(batch, attempt))
        if conn is not None:
            conn.close()

    def _post(self, conn: http.client.HTTPConnection, batch: Batch) -> Attempt:
        headers = {
            "Content-Type": "application/x-protobuf",
            "Authorization": f"Bearer {self.token}",
        }
        sent = time.time()
        status: int | None = None
        retry_after: str | None = None
        rejected = 0
        error = ""
        try:
            conn.request("POST", "/v1/traces", body=batch.body, headers=headers)
            response = conn.getresponse()
            body = response.read()
            status, retry_after = response.status, response.getheader("Retry-After")
            if 200 <= status < 300:
                answer = ExportTraceServiceResponse.FromString(body)
                rejected = answer.partial_success.rejected_spans
        except (OSError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"
        return Attempt(
            batch=batch.number,
            spans=len(batch.spans),
            sent_at=sent,
            answered_at=time.time(),
            status=status,
            retry_after=retry_after,
            rejected_spans=rejected,
            error=error,
        )

    @staticmethod
    def _retry_delay(batch: Batch, attempt: Attempt) -> float:
        if attempt.retry_after is not None and attempt.retry_after.isdigit():
            return min(float(attempt.retry_after), RETRY_AFTER_CAP_S)
        return min(0.25 * 2 ** min(batch.tries, 5), 5.0)

    def stop_new(self) -> None:
        self._stop_new.set()
        self._threads[0].join(timeout=10)

    def finish(self, *, timeout: float) -> bool:
        """Wait until every batch is acknowledged or refused for good."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not all(b.acked or b.final for b in self.batches):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.5))
        return True

    def close(self) -> None:
        self._stop_new.set()
        self._closed.set()
        with self._lock:
            self._lock.notify_all()
        for thread in self._threads:
            thread.join(timeout=REQUEST_TIMEOUT_S + 5)

    # --- what happened -------------------------------------------------------------
    def snapshot(self) -> tuple[list[Batch], list[Attempt]]:
        with self._lock:
            return list(self.batches), list(self.attempts)

    def acknowledged_spans(self) -> set[SpanKey]:
        batches, _ = self.snapshot()
        return {key for batch in batches if batch.acked for key in batch.spans}

    def created_keys(self) -> set[SpanKey]:
        batches, _ = self.snapshot()
        return {key for batch in batches for key in batch.spans}

    def completed_traces(self, *, by: float | None = None) -> set[bytes]:
        """Traces whose every span was acknowledged (by the time ``by``, if given)."""
        batches, _ = self.snapshot()
        acked_at: dict[bytes, float] = {}
        pending: set[bytes] = set()
        with self._lock:
            if self._held_root is not None:
                pending.add(self._held_root.trace_id)
        for batch in batches:
            for trace_id, _ in batch.spans:
                if batch.acked_at is None:
                    pending.add(trace_id)
                else:
                    acked_at[trace_id] = max(acked_at.get(trace_id, 0.0), batch.acked_at)
        return {t for t, at in acked_at.items() if t not in pending and (by is None or at <= by)}

    def created_spans(self, *, since: float, until: float) -> int:
        batches, _ = self.snapshot()
        return sum(len(b.spans) for b in batches if since <= b.created_at < until)

    def acked_count(self, *, sent_after: float = 0.0) -> int:
        with self._lock:
            return sum(1 for a in self.attempts if a.acknowledged and a.sent_at >= sent_after)
