import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.ingest.decoding import DecodeError
from apps.ingest.decoding.json_depth import MAX_JSON_DEPTH, json_depth_check

CHUNK = 1 << 20


def nested(levels: int, inner: str = "1") -> bytes:
    return ("[" * levels + inner + "]" * levels).encode()


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    return 0


def test_nesting_up_to_the_limit_passes_and_one_more_level_is_refused() -> None:
    json_depth_check(nested(MAX_JSON_DEPTH))

    with pytest.raises(DecodeError, match=f"deeper than {MAX_JSON_DEPTH} levels"):
        json_depth_check(nested(MAX_JSON_DEPTH + 1))


def test_objects_count_as_levels_like_arrays() -> None:
    body = ('{"a":[' * 33 + "1" + "]}" * 33).encode()

    with pytest.raises(DecodeError):
        json_depth_check(body)


@pytest.mark.parametrize(
    "body",
    [
        b'["' + b"[{" * 500 + b'"]',
        b'["\\"' + b"[" * 500 + b'"]',
        b'["\\\\\\"' + b"[" * 500 + b'"]',
        b'["\\\\", "\\\\\\\\", "' + b"{" * 500 + b'"]',
    ],
    ids=["brackets", "after an escaped quote", "after an escaped backslash and quote", "many"],
)
def test_brackets_inside_strings_do_not_count(body: bytes) -> None:
    json.loads(body)

    json_depth_check(body)


def test_an_escaped_backslash_ends_its_string() -> None:
    body = b'["\\\\",' + nested(MAX_JSON_DEPTH) + b"]"

    with pytest.raises(DecodeError):
        json_depth_check(body)


def test_depth_and_strings_carry_across_chunks() -> None:
    siblings = b"[]," * (CHUNK // 2)
    deep = b"[" + siblings + nested(MAX_JSON_DEPTH) + b"]"
    in_string = b'["' + b"[" * (CHUNK + 10) + b'"]'

    with pytest.raises(DecodeError):
        json_depth_check(deep)
    json_depth_check(in_string)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{} é'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='k"\\[]{}', max_size=3), children, max_size=3)
    ),
    max_leaves=12,
)


@given(json_values)
def test_the_count_matches_the_nesting_of_any_json_value(value: Any) -> None:
    depth = depth_of(value)
    inner = json.dumps(value, ensure_ascii=False)

    json_depth_check(nested(MAX_JSON_DEPTH - depth, inner))
    with pytest.raises(DecodeError):
        json_depth_check(nested(MAX_JSON_DEPTH - depth + 1, inner))
