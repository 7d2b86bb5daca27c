"""RFC 3339 timestamps with up to nanosecond precision, to unix nanoseconds.

``datetime`` stops at microseconds, so the fields are read separately; the date
part repeats within a batch, hence the cache.
"""

import re
from datetime import date
from functools import lru_cache

from apps.core.time import NS_PER_S, S_PER_DAY

_RFC3339 = re.compile(
    r"(\d{4}-\d\d-\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d\d):(\d\d))\Z",
    re.ASCII,
)
_EPOCH = date(1970, 1, 1).toordinal()


@lru_cache(maxsize=256)
def _epoch_days(text: str) -> int | None:
    try:
        return date.fromisoformat(text).toordinal() - _EPOCH
    except ValueError:
        return None


def parse_rfc3339_ns(text: str) -> int | None:
    """Unix nanoseconds, or None if the text is not an RFC 3339 date-time.

    A leap second (:60) counts as the first second of the next minute, as POSIX
    time has no other place for it.
    """
    match = _RFC3339.match(text)
    if match is None:
        return None
    day, hour, minute, second, fraction, sign, offset_hours, offset_minutes = match.groups()
    days = _epoch_days(day)
    hours, minutes, secs = int(hour), int(minute), int(second)
    if days is None or hours > 23 or minutes > 59 or secs > 60:
        return None
    seconds = days * S_PER_DAY + hours * 3600 + minutes * 60 + secs
    if sign:
        hours, minutes = int(offset_hours), int(offset_minutes)
        if hours > 23 or minutes > 59:
            return None
        offset = hours * 3600 + minutes * 60
        seconds -= offset if sign == "+" else -offset
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    return seconds * NS_PER_S + nanos
