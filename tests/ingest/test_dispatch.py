import gzip

import pytest

from apps.ingest.decoding import (
    BodyTooLarge,
    UnsupportedMediaType,
    decode_native,
    decode_otlp,
    otlp_encoding,
)
from tests.builders.otlp_samples import SAMPLE_RECORDS, by_span_id, sample_spans
from tests.builders.spans import encode
from tests.ingest.test_otlp_json import SAMPLE


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/x-protobuf", "protobuf"),
        ("application/protobuf", "protobuf"),
        ("Application/JSON; charset=utf-8", "json"),
    ],
)
def test_content_type_picks_the_encoding(content_type: str, expected: str) -> None:
    assert otlp_encoding(content_type) == expected


@pytest.mark.parametrize("content_type", [None, "", "text/plain", "application/grpc"])
def test_other_content_types_are_unsupported(content_type: str | None) -> None:
    with pytest.raises(UnsupportedMediaType):
        otlp_encoding(content_type)


def test_gzipped_protobuf_and_json_bodies_decode_alike() -> None:
    protobuf = gzip.compress(encode(sample_spans()))
    json_body = gzip.compress(SAMPLE)

    from_protobuf = decode_otlp(
        protobuf, encoding="protobuf", content_encoding="gzip", max_size=1 << 20
    )
    from_json = decode_otlp(json_body, encoding="json", content_encoding="gzip", max_size=1 << 20)

    assert by_span_id(from_protobuf.spans) == by_span_id(from_json.spans) == SAMPLE_RECORDS


def test_the_size_cap_applies_after_decompression() -> None:
    body = gzip.compress(b'{"spans": []}' + b" " * 5000)

    with pytest.raises(BodyTooLarge):
        decode_native(body, content_encoding="gzip", max_size=4096)
    assert decode_native(body, content_encoding="gzip", max_size=8192).spans == []
