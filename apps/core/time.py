"""Time as the data flow carries it: nanosecond integers, epoch seconds and buckets.

Spans carry Unix nanoseconds; rollup buckets start at epoch seconds that are a
multiple of their width; pages and APIs speak milliseconds. Every conversion
between them is here, once.
"""

import math
from datetime import UTC, date, datetime

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
S_PER_DAY = 86_400
NS_PER_DAY = S_PER_DAY * NS_PER_S

# Widths in seconds of the rollup buckets, finest first: analysis marks the finest
# dirty, rollups merge each coarser one from the one below. Ten minutes sits between
# the minute and the hour so that a day's chart (a point every ten minutes) and the
# edges of a window read tens of buckets, not hundreds of minutes.
RESOLUTIONS = (10, 60, 600, 3600, 86400)
FINEST_RESOLUTION = RESOLUTIONS[0]


def ns_to_datetime(ns: int) -> datetime:
    """An aware UTC datetime, to the microsecond (truncated)."""
    return datetime.fromtimestamp(ns // NS_PER_S, tz=UTC).replace(
        microsecond=(ns % NS_PER_S) // NS_PER_US
    )


def datetime_to_ns(moment: datetime) -> int:
    return int(moment.timestamp()) * NS_PER_S + moment.microsecond * NS_PER_US


def ns_to_ms(ns: int) -> float:
    """Milliseconds to the microsecond, as pages and APIs show them."""
    return round(ns / NS_PER_MS, 3)


def to_seconds(moment: datetime) -> int:
    """Epoch seconds, rounded down."""
    return math.floor(moment.timestamp())


def to_datetime(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def day_start_ns(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * NS_PER_S


def align_down(seconds: int, resolution: int) -> int:
    """The start of the bucket of ``resolution`` seconds holding ``seconds``."""
    return seconds - seconds % resolution


def align_up(seconds: int, resolution: int) -> int:
    return -(-seconds // resolution) * resolution


def bucket_start(start_ns: int, resolution: int) -> datetime:
    """The start of the bucket of ``resolution`` seconds holding a nanosecond time."""
    return to_datetime(align_down(start_ns // NS_PER_S, resolution))
