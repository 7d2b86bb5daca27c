"""One duration format everywhere: known answers at every boundary of ``format_ms``."""

from datetime import UTC, datetime, timedelta

import pytest
from django.template import Context, Template

from apps.core.figures import format_ms, format_seconds


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "—"),
        (float("nan"), "—"),
        (float("inf"), "—"),
        (0, "0 ms"),
        (0.0, "0 ms"),
        (0.04, "< 0.1 ms"),
        (0.05, "0.1 ms"),
        (0.25, "0.3 ms"),  # halves round up, as people do, not to even
        (0.42, "0.4 ms"),
        (12, "12 ms"),
        (12.0, "12 ms"),
        (12.04, "12 ms"),
        (12.34, "12.3 ms"),
        (145.2, "145.2 ms"),
        (850.4, "850.4 ms"),
        (1331.469, "1.33 s"),
        (999.94, "999.9 ms"),
        (999.95, "1 s"),  # rounds to 1000.0 ms: a second, never "1000 ms"
        (1000, "1 s"),
        (1004.9, "1 s"),
        (1005, "1.01 s"),
        (1250, "1.25 s"),
        (1620, "1.62 s"),
        (2500, "2.5 s"),
        (9994.9, "9.99 s"),
        (9995, "10 s"),
        (12_500, "12.5 s"),
        (59_940, "59.9 s"),
        (59_949.9, "59.9 s"),
        (59_950, "1 min"),  # 59.95 s rounds to 60.0 s: a minute
        (60_000, "1 min"),
        (65_000, "1 min 5 s"),
        (95_000, "1 min 35 s"),
        (250_000, "4 min 10 s"),
        (3_599_499, "59 min 59 s"),
        (3_599_500, "1 h"),
        (5_400_000, "1 h 30 min"),
        (86_399_900, "1 d"),
        (3 * 86_400_000, "3 d"),
        (2 * 86_400_000 + 6 * 3_600_000, "2 d 6 h"),
        (-0.03, "< 0.1 ms"),
        (-120, "\u2212120 ms"),
        (-1331.469, "\u22121.33 s"),
        (-65_000, "\u22121 min 5 s"),
    ],
)
def test_a_duration_reads_in_ms_below_a_second_with_at_most_one_decimal(
    value: float | None, text: str
) -> None:
    assert format_ms(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "—"), (0, "0 ms"), (5, "5 s"), (59.9, "59.9 s"), (300, "5 min"), (3600, "1 h"),
     (259_200, "3 d"), (21_600, "6 h")],
)  # fmt: skip
def test_a_duration_in_seconds_reads_the_same_way(seconds: float | None, text: str) -> None:
    assert format_seconds(seconds) == text


def test_how_long_something_lasted_reads_to_the_second() -> None:
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    cases = {
        start + timedelta(seconds=0.4): "0 s",
        start + timedelta(seconds=44.6): "45 s",
        start + timedelta(minutes=3, seconds=12): "3 min 12 s",
        start + timedelta(hours=2): "2 h",
        start - timedelta(seconds=5): "0 s",  # a clock that went back: no negative time
    }
    template = Template("{% load figures %}{{ start|lasted:end }}")
    for end, text in cases.items():
        assert template.render(Context({"start": start, "end": end})) == text
    assert template.render(Context({"start": start, "end": None})) == "—"


def test_the_template_filters_are_the_same_function() -> None:
    rendered = Template(
        "{% load figures %}{{ a|ms }}|{{ b|ms }}|{{ c|ms }}|{{ d|seconds }}|{{ e|ms }}"
    ).render(Context({"a": 1331.469, "b": 999.95, "c": None, "d": 300, "e": "145.25"}))
    assert rendered == "1.33 s|1 s|—|5 min|145.3 ms"
