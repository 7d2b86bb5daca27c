"""JSON bodies: OTLP/JSON export requests and native span batches, with drawn fields.

Each document strategy yields ``(document, spans)``: the spans it holds, to check that
every one is either accepted or counted as rejected.
"""

import base64
import re
from typing import Any

from hypothesis import strategies as st

INT64_EDGES = [0, 1, -1, 2**63 - 1, 2**63, -(2**63), 2**64 - 1]
# Numbers that int() or float() would take but proto3 JSON does not, and the reverse.
ODD_NUMBER_TEXTS = ["1e9", " 5", "+5", "0x10", "1_000", "\uff15", "", "-0", "9" * 30, "1.5"]
NUMERIC_KEYS = [
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.system",
    "service.name",
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
# Any JSON value at all, of moderate size.
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=30,
)

attribute_keys = st.one_of(st.text(max_size=20), st.sampled_from(NUMERIC_KEYS))


def _base64(data: bytes, urlsafe: bool, padded: bool) -> str:
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    return text if padded else text.rstrip("=")


def id_texts(size: int) -> st.SearchStrategy[str]:
    """Mostly well-formed ids (hex either case, base64), some of any length or alphabet."""
    exact = st.binary(min_size=size, max_size=size)
    return st.one_of(
        exact.map(bytes.hex),
        exact.map(lambda data: data.hex().upper()),
        exact.map(lambda data: _base64(data, urlsafe=False, padded=True)),
        st.just("0" * 2 * size),
        st.binary(max_size=2 * size).map(bytes.hex),
        st.text(max_size=3 * size),
    )


def valid_hex_ids(size: int) -> st.SearchStrategy[str]:
    return st.binary(min_size=size, max_size=size).map(bytes.hex)


# --- OTLP/JSON ------------------------------------------------------------------------

int64_numbers = st.one_of(st.integers(-(2**63), 2**64 - 1), st.sampled_from(INT64_EDGES))
# int64 fields as numbers or as the decimal strings the proto3 mapping writes.
int64_fields = st.one_of(int64_numbers, int64_numbers.map(str))

_otlp_scalars = st.one_of(
    st.text().map(lambda v: {"stringValue": v}),
    int64_fields.map(lambda v: {"intValue": v}),
    st.integers(2**64, 2**80).map(lambda v: {"intValue": str(v)}),
    st.booleans().map(lambda v: {"boolValue": v}),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: {"doubleValue": v}),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-0"]).map(
        lambda v: {"doubleValue": v}
    ),
    st.builds(_base64, st.binary(max_size=24), st.booleans(), st.booleans()).map(
        lambda v: {"bytesValue": v}
    ),
    st.just({}),
)
otlp_any_values = st.recursive(
    _otlp_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda vs: {"arrayValue": {"values": vs}}),
        st.lists(st.fixed_dictionaries({"key": attribute_keys, "value": inner}), max_size=4).map(
            lambda vs: {"kvlistValue": {"values": vs}}
        ),
    ),
    max_leaves=5,
)
otlp_attributes = st.lists(
    st.fixed_dictionaries({"key": attribute_keys, "value": otlp_any_values}), max_size=3
)
# Every integer a JSON decoder reads as one (int64 and uint64).
_span_times = st.one_of(
    st.integers(1, 2**63 - 1), st.sampled_from(INT64_EDGES), st.integers(-(2**63), 2**64 - 1)
)


@st.composite
def otlp_json_spans(draw: st.DrawFn) -> dict[str, Any]:
    start, end = draw(_span_times), draw(_span_times)
    if draw(st.booleans()):
        start, end = sorted((start, end))
    as_text = draw(st.booleans())
    span: dict[str, Any] = {
        "traceId": draw(id_texts(16)),
        "spanId": draw(id_texts(8)),
        "name": draw(st.text(max_size=30)),
        "startTimeUnixNano": str(start) if as_text else start,
        "endTimeUnixNano": str(end) if as_text else end,
    }
    optional = {
        "parentSpanId": id_texts(8),
        "kind": st.one_of(st.integers(-1, 7), st.sampled_from(["SPAN_KIND_CLIENT", "CLIENT"])),
        "attributes": otlp_attributes,
        "events": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": st.text(max_size=10),
                    "timeUnixNano": int64_fields,
                    "attributes": otlp_attributes,
                },
            ),
            max_size=2,
        ),
        "status": st.fixed_dictionaries(
            {},
            optional={
                "code": st.one_of(st.integers(-1, 4), st.sampled_from(["STATUS_CODE_ERROR"])),
                "message": st.text(max_size=20),
            },
        ),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            span[key] = draw(strategy)
    return span


@st.composite
def otlp_json_documents(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    resource_spans = []
    count = 0
    for _ in range(draw(st.integers(0, 2))):
        scope_spans = []
        for _ in range(draw(st.integers(0, 2))):
            spans = draw(st.lists(otlp_json_spans(), max_size=3))
            count += len(spans)
            scope = {"scope": {"name": draw(st.text(max_size=10))}, "spans": spans}
            scope_spans.append(scope)
        resource = {"attributes": draw(otlp_attributes)}
        resource_spans.append({"resource": resource, "scopeSpans": scope_spans})
    document = {"resourceSpans": resource_spans}
    if draw(st.booleans()):
        # Writers that use the proto field names.
        document = snake_keys(document)
    return document, count


def snake_keys(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            re.sub("[A-Z]", lambda m: "_" + m[0].lower(), key): snake_keys(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [snake_keys(item) for item in node]
    return node


# --- Native JSON ----------------------------------------------------------------------

rfc3339_texts = st.one_of(
    st.from_regex(
        r"\A\d{4}-[01]\d-[0-3]\d[Tt ][0-2]\d:[0-6]\d:[0-6]\d"
        r"(\.\d{1,12})?([Zz]|[+-][0-2]\d:[0-6]\d)\Z"
    ),
    st.datetimes().map(lambda moment: moment.isoformat() + "Z"),
)
native_times = st.one_of(
    st.integers(1, 2**63 - 1), _span_times, rfc3339_texts, _span_times.map(str)
)
native_attributes = st.dictionaries(
    attribute_keys,
    st.recursive(
        json_scalars | st.integers(2**63, 2**70),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=5,
    ),
    max_size=3,
)


@st.composite
def native_spans(draw: st.DrawFn) -> dict[str, Any]:
    start, end = draw(native_times), draw(native_times)
    if draw(st.booleans()) and type(start) is type(end):
        start, end = sorted((start, end))
    span: dict[str, Any] = {
        "trace_id": draw(id_texts(16)),
        "span_id": draw(id_texts(8)),
        "name": draw(st.text(max_size=30)),
        "start": start,
        "end": end,
    }
    optional = {
        "parent_id": st.one_of(st.none(), id_texts(8)),
        "service": st.text(max_size=10),
        "kind": st.sampled_from(["internal", "SERVER", "Client", "producer", "bogus", ""]),
        "status": st.sampled_from(["unset", "OK", "error", "failed"]),
        "status_message": st.text(max_size=20),
        "attributes": native_attributes,
        "events": st.lists(
            st.fixed_dictionaries(
                {"name": st.text(max_size=10), "time": native_times},
                optional={"attributes": native_attributes},
            ),
            max_size=2,
        ),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            span[key] = draw(strategy)
    return span


@st.composite
def native_documents(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    spans = draw(st.lists(native_spans(), max_size=4))
    document: dict[str, Any] = {"spans": spans}
    if draw(st.booleans()):
        document["resource"] = draw(native_attributes)
    return document, len(spans)
