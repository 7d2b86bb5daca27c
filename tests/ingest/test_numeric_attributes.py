"""Attributes analysis reads as numbers are range-checked by every decoder; integers
beyond 64 bits are dropped by the JSON decoders, the only ones that can produce them."""

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from apps.ingest.decoding import DecodeResult, decode_native_json, decode_otlp_json
from apps.ingest.decoding import decode_otlp_protobuf as decode_protobuf
from apps.ingest.decoding.numeric import DROPPED_ATTRIBUTES, ENGINE_SECONDS, MAX_NOTES
from tests.builders.spans import T0, encode, span

TTFC = "gen_ai.response.time_to_first_chunk"
INPUT = "gen_ai.usage.input_tokens"
PROMPT = "gen_ai.usage.prompt_tokens"
TRACE = "5b8efff798038103d269b633813fc60c"
BIG = 10**400
Decode = Callable[..., DecodeResult]


def _otlp_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        return {"doubleValue": "NaN" if math.isnan(value) else "Infinity"}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_otlp_value(item) for item in value]}}
    return {"stringValue": value}


def _otlp_attributes(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _otlp_value(value)} for key, value in attributes.items()]


def via_protobuf(*spans: dict[str, Any], name: str = "chat") -> DecodeResult:
    return decode_protobuf(
        encode(
            [
                span(0x10 + i, name=name if i == 0 else "chat", attributes=attributes)
                for i, attributes in enumerate(spans)
            ]
        )
    )


def via_otlp_json(*spans: dict[str, Any], name: str = "chat") -> DecodeResult:
    body = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": TRACE,
                                "spanId": f"{0x10 + i:016x}",
                                "name": name if i == 0 else "chat",
                                "startTimeUnixNano": str(T0),
                                "endTimeUnixNano": str(T0 + 1000),
                                "attributes": _otlp_attributes(attributes),
                            }
                            for i, attributes in enumerate(spans)
                        ]
                    }
                ]
            }
        ]
    }
    return decode_otlp_json(json.dumps(body).encode())


def via_native(*spans: dict[str, Any], name: str = "chat") -> DecodeResult:
    body = {
        "spans": [
            {
                "trace_id": TRACE,
                "span_id": f"{0x10 + i:016x}",
                "name": name if i == 0 else "chat",
                "start": T0,
                "end": T0 + 1000,
                "attributes": attributes,
            }
            for i, attributes in enumerate(spans)
        ]
    }
    return decode_native_json(json.dumps(body, allow_nan=False).encode())


DECODERS = {"protobuf": via_protobuf, "otlp_json": via_otlp_json, "native": via_native}
JSON_DECODERS = {"otlp_json": via_otlp_json, "native": via_native}


@pytest.fixture(params=list(DECODERS))
def decode(request: pytest.FixtureRequest) -> Decode:
    return DECODERS[request.param]


@pytest.fixture(params=list(JSON_DECODERS))
def decode_json(request: pytest.FixtureRequest) -> Decode:
    return JSON_DECODERS[request.param]


def notes_and_rest(attributes: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    notes = attributes[DROPPED_ATTRIBUTES]
    assert isinstance(notes, list)
    return notes, {k: v for k, v in attributes.items() if k != DROPPED_ATTRIBUTES}


def the_span(result: DecodeResult) -> dict[str, Any]:
    assert result.rejected == 0
    [record] = result.spans
    assert record.name == "chat"
    return record.attributes


@pytest.mark.parametrize(
    ("value", "problem", "shown"),
    [
        (1e300, "out of range", "1e+300"),
        ("1e300", "out of range", "1e300"),
        (-1, "out of range", "-1"),
        (86_400.5, "out of range", "86400.5"),
        ("Infinity", "out of range", "Infinity"),
        ("NaN", "not a number", "NaN"),
        ("soon", "not a number", "soon"),
        (True, "not a number", "True"),
        ([0.25], "not a number", "[0.25]"),
    ],
)
def test_an_unusable_time_to_first_chunk_is_dropped_and_the_span_kept(
    decode: Decode, value: Any, problem: str, shown: str
) -> None:
    result = decode({TTFC: value, "gen_ai.operation.name": "chat"})

    attributes = the_span(result)
    assert TTFC not in attributes
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes[DROPPED_ATTRIBUTES] == [f"{TTFC}: {problem} ({shown})"]
    assert result.error_message == f"dropped 1 attribute: {TTFC} {problem} (1)"
    assert result.errors == [f"span 0: dropped {TTFC}: {problem} ({shown})"]


@pytest.mark.parametrize("key", ENGINE_SECONDS)
@pytest.mark.parametrize(("value", "problem"), [(-0.5, "out of range"), ("soon", "not a number")])
def test_an_unusable_engine_timing_is_dropped_and_usable_ones_kept(
    decode: Decode, key: str, value: Any, problem: str
) -> None:
    others = {other: 0.125 for other in ENGINE_SECONDS if other != key}
    result = decode({key: value, **others})

    attributes = the_span(result)
    assert key not in attributes
    assert {other: attributes[other] for other in others} == others
    assert result.error_message == f"dropped 1 attribute: {key} {problem} (1)"


@pytest.mark.parametrize("decoder", ["protobuf", "otlp_json"])
def test_a_nan_double_time_to_first_chunk_is_dropped(decoder: str) -> None:
    result = DECODERS[decoder]({TTFC: math.nan})

    assert TTFC not in the_span(result)
    assert result.error_message == f"dropped 1 attribute: {TTFC} not a number (1)"


def test_a_400_digit_time_to_first_chunk_is_dropped(decode_json: Decode) -> None:
    result = decode_json({TTFC: BIG, "gen_ai.operation.name": "chat"})

    attributes = the_span(result)
    assert TTFC not in attributes
    [note] = attributes[DROPPED_ATTRIBUTES]
    assert note.startswith(f"{TTFC}: integer outside 64-bit range (1000")
    assert len(note) < 120
    assert result.error_message == f"dropped 1 attribute: {TTFC} integer outside 64-bit range (1)"


def test_only_the_unusable_value_is_dropped_a_usable_one_is_kept_exactly(decode: Decode) -> None:
    result = decode({TTFC: 1e300}, {TTFC: 0.25}, {TTFC: "0.25"}, {TTFC: 0}, {TTFC: 86_400})

    assert result.rejected == 0
    bad, *good = [record.attributes for record in result.spans]
    assert TTFC not in bad
    assert [attributes[TTFC] for attributes in good] == [0.25, "0.25", 0, 86_400]
    assert not any(DROPPED_ATTRIBUTES in attributes for attributes in good)
    assert result.dropped == 1


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (-5, "out of range"),
        (1e30, "out of range"),
        ("1e30", "out of range"),
        (2.5, "not a whole number"),
        ("many", "not a number"),
        (False, "not a number"),
    ],
)
def test_an_unusable_token_count_is_dropped_and_the_span_kept(
    decode: Decode, value: Any, problem: str
) -> None:
    result = decode({INPUT: value, "gen_ai.usage.output_tokens": 40}, {INPUT: 12})

    assert result.rejected == 0
    bad, good = [record.attributes for record in result.spans]
    assert INPUT not in bad
    assert bad["gen_ai.usage.output_tokens"] == 40
    assert notes_and_rest(bad)[0][0].startswith(f"{INPUT}: {problem} (")
    assert good == {INPUT: 12}
    assert result.error_message == f"dropped 1 attribute: {INPUT} {problem} (1)"


def test_a_bad_deprecated_token_count_is_dropped_and_not_copied(decode: Decode) -> None:
    attributes = the_span(decode({PROMPT: -5}))

    assert PROMPT not in attributes
    assert INPUT not in attributes
    assert attributes[DROPPED_ATTRIBUTES] == [f"{PROMPT}: out of range (-5)"]


def test_a_good_deprecated_token_count_stands_in_for_a_bad_current_one(decode: Decode) -> None:
    attributes = the_span(decode({PROMPT: 12, INPUT: 1e30}))

    assert attributes[PROMPT] == attributes[INPUT] == 12


def test_the_note_lists_every_dropped_value_of_a_span_and_the_message_counts_them(
    decode: Decode,
) -> None:
    result = decode({TTFC: -1, INPUT: -5, "gen_ai.usage.output_tokens": "many"}, {TTFC: "1e300"})

    assert result.rejected == 0
    first, second = [record.attributes for record in result.spans]
    assert first[DROPPED_ATTRIBUTES] == [
        f"{TTFC}: out of range (-1)",
        f"{INPUT}: out of range (-5)",
        "gen_ai.usage.output_tokens: not a number (many)",
    ]
    assert second[DROPPED_ATTRIBUTES] == [f"{TTFC}: out of range (1e300)"]
    assert result.error_message == (
        f"dropped 4 attributes: {TTFC} out of range (2), {INPUT} out of range (1), "
        "gen_ai.usage.output_tokens not a number (1)"
    )


def test_a_rejected_span_counts_no_dropped_attribute_and_both_share_the_message(
    decode: Decode,
) -> None:
    result = decode({TTFC: 1e300}, {TTFC: -1}, name="")

    assert result.rejected == 1
    assert [record.attributes[DROPPED_ATTRIBUTES] for record in result.spans] == [
        [f"{TTFC}: out of range (-1)"]
    ]
    assert result.error_message == (
        f"rejected 1 span: empty name (1); dropped 1 attribute: {TTFC} out of range (1)"
    )
    assert result.errors == ["span 0: empty name", f"span 1: dropped {TTFC}: out of range (-1)"]


def test_native_integers_beyond_64_bits_are_dropped_wherever_they_appear() -> None:
    body = {
        "resource": {"service.name": "chat-api", "host": {"pid": BIG}},
        "spans": [
            {
                "trace_id": TRACE,
                "span_id": "1111111111111111",
                "name": "chat",
                "start": T0,
                "end": T0 + 1000,
                "attributes": {
                    "big": BIG,
                    "just.over": 2**63,
                    "just.under": -(2**63) - 1,
                    "max": 2**63 - 1,
                    "min": -(2**63),
                    "scores": [1, [2, BIG]],
                    "rows": [{"n": -BIG}],
                    "http": {"status": BIG, "route": "/x"},
                },
                "events": [{"name": "first_token", "time": T0 + 10, "attributes": {"n": BIG}}],
            }
        ],
    }

    result = decode_native_json(json.dumps(body).encode())

    [record] = result.spans
    assert record.service == "chat-api"
    assert record.resource == {"service.name": "chat-api"}
    notes, rest = notes_and_rest(record.attributes)
    assert rest == {"max": 2**63 - 1, "min": -(2**63), "http.route": "/x"}
    assert [note.split(":")[0] for note in notes] == [
        "n in event first_token", "big", "just.over", "just.under", "scores", "rows",
        "http.status",
    ]  # fmt: skip
    assert record.events[0].attributes == {}
    assert result.dropped == 8
    assert result.error_message == "dropped 8 attributes: integer outside 64-bit range (8)"
    assert result.errors[0].startswith("resource: dropped host.pid: integer outside 64-bit")


def test_otlp_json_int64_values_beyond_64_bits_are_dropped_wherever_they_appear() -> None:
    attributes = [
        {"key": "big", "value": {"intValue": str(BIG)}},
        {"key": "as.number", "value": {"intValue": 2**64}},
        {"key": "max", "value": {"intValue": str(2**63 - 1)}},
        {"key": "min", "value": {"intValue": -(2**63)}},
        {"key": "scores", "value": _otlp_value([1, BIG])},
        {
            "key": "http",
            "value": {"kvlistValue": {"values": [{"key": "status", "value": {"intValue": BIG}}]}},
        },
    ]
    span = {
        "traceId": TRACE,
        "spanId": "1111111111111111",
        "name": "chat",
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 1000),
        "attributes": attributes,
        "events": [{"name": "e", "timeUnixNano": str(T0), "attributes": attributes[:1]}],
    }
    resource = {"attributes": [{"key": "process.pid", "value": {"intValue": str(-BIG)}}]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}

    result = decode_otlp_json(json.dumps(body).encode())

    [record] = result.spans
    notes, rest = notes_and_rest(record.attributes)
    assert rest == {"max": 2**63 - 1, "min": -(2**63)}
    assert [note.split(":")[0] for note in notes] == [
        "big in event e", "big", "as.number", "scores", "http.status",
    ]  # fmt: skip
    assert record.resource == {}
    assert result.error_message == "dropped 6 attributes: integer outside 64-bit range (6)"
    assert result.errors[0].startswith("resource 0: dropped process.pid: integer outside")


def test_the_note_on_a_span_is_capped_and_its_values_shortened() -> None:
    attributes = {f"k{i:02}": BIG for i in range(MAX_NOTES + 3)}
    long_key = "x" * 500

    result = via_native({**attributes, long_key: BIG, TTFC: "9" * 100})

    notes = the_span(result)[DROPPED_ATTRIBUTES]
    assert len(notes) == MAX_NOTES + 1
    assert notes[-1] == "and 5 more"
    assert notes[0] == "k00: integer outside 64-bit range (" + "1" + "0" * 38 + "…)"
    assert result.dropped == MAX_NOTES + 5
    assert len(result.errors) == 5
    assert all(len(error) < 200 for error in result.errors)


def test_protobuf_drops_an_unusable_time_to_first_chunk_on_a_span_with_events() -> None:
    sent = span(
        0x10,
        name="chat",
        attributes={TTFC: 1e300, "gen_ai.operation.name": "chat"},
        events=[("first_token", T0 + 10, {"n": 1})],
    )

    [record] = decode_protobuf(encode([sent])).spans

    assert TTFC not in record.attributes
    assert [(e.name, e.attributes) for e in record.events] == [("first_token", {"n": 1})]
