"""Decoding throughput: 512-span batches in each accepted format, in process.

The batch is 64 traces of a RAG chat request (8 spans each, 2 to 7 attributes,
token counts and ids varying per trace, deprecated GenAI names on some spans) plus
a typical SDK resource. Times are for body bytes to span records, one core.
"""

import gzip
import json
import random
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from apps.core.time import NS_PER_MS, NS_PER_S, to_datetime
from apps.ingest.decoding import (
    decode_native,
    decode_native_json,
    decode_otlp,
    decode_otlp_json,
    decode_otlp_protobuf,
)
from apps.ingest.decoding.otlp_schema import RawExportTraceServiceRequest
from bench.report import print_rows, summarise, write

TRACES = 64
BATCHES = 200
MAX_SIZE = 20 * 1024 * 1024

RESOURCE = {
    "service.name": "chat-api",
    "service.version": "2.14.0",
    "deployment.environment.name": "production",
    "host.name": "chat-api-7d9f-xk2p",
    "process.pid": 4711,
    "telemetry.sdk.language": "python",
    "telemetry.sdk.name": "opentelemetry",
    "telemetry.sdk.version": "1.27.0",
}
KINDS = {"internal": 1, "server": 2, "client": 3}
PB_KINDS = {
    "internal": Span.SPAN_KIND_INTERNAL,
    "server": Span.SPAN_KIND_SERVER,
    "client": Span.SPAN_KIND_CLIENT,
}
PB_STATUSES = {"ok": Status.STATUS_CODE_OK, "unset": Status.STATUS_CODE_UNSET}


def trace_spans(rng: random.Random, start: int) -> list[dict[str, Any]]:
    trace_id = rng.randbytes(16)
    ids = [rng.randbytes(8) for _ in range(8)]
    tokens_in, tokens_out = rng.randint(200, 4000), rng.randint(20, 900)
    steps: list[tuple[str, str, int, int, dict[str, Any]]] = [
        ("POST /v1/chat", "server", 0, 2_400, {
            "http.request.method": "POST", "url.path": "/v1/chat",
            "http.response.status_code": 200, "user.id": f"user-{rng.randint(1, 10**6)}",
            "session.id": rng.randbytes(8).hex(),
        }),
        ("auth", "internal", 5, 20, {"enduser.id": f"user-{rng.randint(1, 10**6)}"}),
        ("embeddings text-embedding-3-small", "client", 30, 90, {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.request.model": "text-embedding-3-small",
            "gen_ai.system": "openai", "gen_ai.usage.prompt_tokens": rng.randint(5, 80),
        }),
        ("retrieval", "client", 130, 260, {
            "openinference.span.kind": "RETRIEVER", "db.system.name": "postgresql",
            "retrieval.top_k": 8, "retrieval.documents": rng.randint(0, 8),
        }),
        ("rerank", "internal", 270, 340, {
            "openinference.span.kind": "RERANKER", "reranker.model_name": "bge-reranker-v2",
        }),
        ("execute_tool get_weather", "internal", 350, 600, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": f"call_{rng.randbytes(6).hex()}",
        }),
        ("chat gpt-4o", "client", 620, 2_350, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.provider.name": "openai", "gen_ai.request.temperature": 0.2,
            "gen_ai.usage.input_tokens": tokens_in, "gen_ai.usage.output_tokens": tokens_out,
            "gen_ai.response.finish_reasons": ["stop"],
        }),
        ("cache set", "client", 2_360, 2_380, {"db.system.name": "redis", "cache.hit": False}),
    ]  # fmt: skip
    spans = []
    for position, (name, kind, begin_ms, end_ms, attributes) in enumerate(steps):
        spans.append({
            "trace_id": trace_id, "span_id": ids[position],
            "parent_id": ids[0] if position else None, "name": name, "kind": kind,
            "start": start + begin_ms * NS_PER_MS + rng.randint(0, NS_PER_MS - 1),
            "end": start + end_ms * NS_PER_MS + rng.randint(0, NS_PER_MS - 1),
            "attributes": attributes,
            "events": [("first_token", start + 980 * NS_PER_MS)] if name.startswith("chat") else [],
            "status": "ok" if position == 0 else "unset",
        })  # fmt: skip
    return spans


def build_spans(seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    base = 1_760_000_000_000_000_000
    return [span for t in range(TRACES) for span in trace_spans(rng, base + t * 3 * NS_PER_S)]


def _pb_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[_pb_value(v) for v in value]))
    return AnyValue(string_value=value)


def _pb_attributes(attributes: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=_pb_value(v)) for k, v in attributes.items()]


def to_protobuf(spans: list[dict[str, Any]]) -> bytes:
    pb_spans = [
        Span(
            trace_id=s["trace_id"], span_id=s["span_id"], parent_span_id=s["parent_id"] or b"",
            name=s["name"], kind=PB_KINDS[s["kind"]], start_time_unix_nano=s["start"],
            end_time_unix_nano=s["end"], attributes=_pb_attributes(s["attributes"]),
            events=[Span.Event(name=n, time_unix_nano=t) for n, t in s["events"]],
            status=Status(code=PB_STATUSES[s["status"]]),
        )
        for s in spans
    ]  # fmt: skip
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=_pb_attributes(RESOURCE)),
                scope_spans=[
                    ScopeSpans(scope=InstrumentationScope(name="chat-api"), spans=pb_spans)
                ],
            )
        ]
    )
    return request.SerializeToString()


def _json_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_json_value(v) for v in value]}}
    return {"stringValue": value}


def _json_attributes(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _json_value(v)} for k, v in attributes.items()]


def to_otlp_json(spans: list[dict[str, Any]]) -> bytes:
    json_spans = [
        {
            "traceId": s["trace_id"].hex(), "spanId": s["span_id"].hex(),
            "parentSpanId": s["parent_id"].hex() if s["parent_id"] else "",
            "name": s["name"], "kind": KINDS[s["kind"]],
            "startTimeUnixNano": str(s["start"]), "endTimeUnixNano": str(s["end"]),
            "attributes": _json_attributes(s["attributes"]),
            "events": [{"name": n, "timeUnixNano": str(t)} for n, t in s["events"]],
            "status": {"code": 1} if s["status"] == "ok" else {},
        }
        for s in spans
    ]  # fmt: skip
    resource = {"attributes": _json_attributes(RESOURCE)}
    scope_spans = [{"scope": {"name": "chat-api"}, "spans": json_spans}]
    return json.dumps(
        {"resourceSpans": [{"resource": resource, "scopeSpans": scope_spans}]}
    ).encode()


def _rfc3339(ns: int) -> str:
    seconds, fraction = divmod(ns, NS_PER_S)
    moment = to_datetime(seconds).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{moment}.{fraction:09d}Z"


def to_native(spans: list[dict[str, Any]], *, rfc3339: bool) -> bytes:
    def when(ns: int) -> int | str:
        return _rfc3339(ns) if rfc3339 else ns

    native = [
        {
            "trace_id": s["trace_id"].hex(), "span_id": s["span_id"].hex(),
            "parent_id": s["parent_id"].hex() if s["parent_id"] else None,
            "name": s["name"], "kind": s["kind"], "start": when(s["start"]),
            "end": when(s["end"]), "attributes": s["attributes"], "status": s["status"],
            "events": [{"name": n, "time": when(t)} for n, t in s["events"]],
        }
        for s in spans
    ]  # fmt: skip
    return json.dumps({"resource": RESOURCE, "spans": native}).encode()


def _time(decode: Callable[[], object]) -> list[float]:
    decode()  # warm caches
    samples = []
    for _ in range(BATCHES):
        start = time.perf_counter()
        decode()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _row(body: bytes, decode: Callable[[], object], spans: int) -> dict[str, Any]:
    row = summarise(_time(decode))
    return {
        "spans_per_s": round(spans / row["p50_ms"] * 1000),
        "body_kib": len(body) // 1024,
        **row,
    }


def run() -> None:
    spans = build_spans()
    count = len(spans)
    protobuf = to_protobuf(spans)
    protobuf_gz = gzip.compress(protobuf)
    otlp_json = to_otlp_json(spans)
    native_ns = to_native(spans, rfc3339=False)
    native_rfc = to_native(spans, rfc3339=True)
    for body, decode in (
        (protobuf, decode_otlp_protobuf),
        (otlp_json, decode_otlp_json),
        (native_ns, decode_native_json),
        (native_rfc, decode_native_json),
    ):
        assert len(decode(body).spans) == count

    rows = {
        "OTLP protobuf": _row(protobuf, lambda: decode_otlp_protobuf(protobuf), count),
        "OTLP protobuf, parse only": _row(
            protobuf, lambda: RawExportTraceServiceRequest.FromString(protobuf), count
        ),
        "OTLP protobuf, gzip": _row(
            protobuf_gz,
            lambda: decode_otlp(
                protobuf_gz, encoding="protobuf", content_encoding="gzip", max_size=MAX_SIZE
            ),
            count,
        ),
        "OTLP JSON": _row(otlp_json, lambda: decode_otlp_json(otlp_json), count),
        "native JSON, unix ns": _row(
            native_ns,
            lambda: decode_native(native_ns, content_encoding=None, max_size=MAX_SIZE),
            count,
        ),
        "native JSON, RFC 3339": _row(
            native_rfc,
            lambda: decode_native(native_rfc, content_encoding=None, max_size=MAX_SIZE),
            count,
        ),
    }
    print_rows(
        f"Decoding {count}-span batches, body to span records, one core",
        rows,
        ["spans_per_s", "body_kib", "p50_ms", "p95_ms", "max_ms"],
    )
    path = write("decode", rows, {"spans_per_batch": count, "batches": BATCHES})
    print(f"\nwritten {path}")
