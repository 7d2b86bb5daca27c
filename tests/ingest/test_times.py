from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.ingest.decoding.times import parse_rfc3339_ns


@given(
    moment=st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ),
    extra_nanos=st.integers(min_value=0, max_value=999),
    offset_minutes=st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59),
)
def test_parsing_agrees_with_datetime_to_the_nanosecond(
    moment: datetime, extra_nanos: int, offset_minutes: int
) -> None:
    local = moment.astimezone(timezone(timedelta(minutes=offset_minutes)))
    text = local.isoformat(timespec="microseconds").replace("+00:00", "Z")
    text = text[:26] + f"{extra_nanos:03d}" + text[26:]  # after the microseconds
    micros = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)

    assert parse_rfc3339_ns(text) == micros * 1000 + extra_nanos


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:00.5Z", 500_000_000),
        ("1970-01-01T01:00:00+01:00", 0),
        ("1969-12-31T23:59:59Z", -1_000_000_000),
        ("2016-12-31T23:59:60Z", 1_483_228_800_000_000_000),  # leap second
    ],
)
def test_known_values(text: str, expected: int) -> None:
    assert parse_rfc3339_ns(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2025-10-09",
        "2025-10-09T08:53Z",
        "2025-10-09T08:53:20",
        "2025-10-09T24:00:00Z",
        "2025-13-01T00:00:00Z",
        "2025-10-09T08:53:20.Z",
        "2025-10-09T08:53:20+2:00",
        "2025-10-09T08:53:20+24:00",
        "2025-10-09T08:53:20Z ",
        "\uff12\uff10\uff12\uff15-10-09T08:53:20Z"  # full-width digits,
        "2025-10-09T\uff10\uff18:53:20Z",
    ],
)
def test_malformed_values_are_refused(text: str) -> None:
    assert parse_rfc3339_ns(text) is None
