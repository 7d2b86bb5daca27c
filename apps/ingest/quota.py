"""A daily quota of stored bytes per account: what one account may add to the disk.

The rate limit counts spans; a span may hold a megabyte, and gzip makes large
attributes almost free on the wire. This counts the bytes of every accepted batch as
they will be stored, per account (``Account.key``) and UTC day, in the shared cache.
Past ``INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY`` requests are refused until midnight UTC.
With the cache unreachable requests are admitted, as the rate limit does: the quota
bounds a day, and a Redis restart costs it minutes.
"""

import math
import time
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache

from apps.ingest.cache_counts import (
    CACHE_ERRORS,
    cache_unreachable,
    counter_add,
    counter_give_back,
)
from apps.teams.accounts import account_of
from apps.teams.ingest_usage import IngestUsage
from apps.teams.models import Team

DAY_S = 86_400
# Outlives its day, so a counter never expires while requests still use it.
_COUNTER_TTL_S = DAY_S + 3600


def daily_bytes_wait(*, account_key: str, now: float | None = None) -> int:
    """Seconds until midnight UTC when the account's quota is used up, else 0; counts nothing.

    Checked before a body is decompressed, so a refused request costs one cache read.
    """
    quota = settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY
    if quota <= 0:
        return 0
    now = time.time() if now is None else now
    day = _day(now)
    try:
        used = cache.get(_key(account_key, day))
        return 0 if used is None or int(used) < quota else _refused(account_key, day, now)
    except CACHE_ERRORS as exc:
        cache_unreachable(exc)
        return 0


def daily_bytes_consume(*, account_key: str, size: int, now: float) -> int:
    """Count a batch's bytes against its account's day; 0 when admitted, else seconds to wait.

    The batch that reaches the quota is admitted, so that the day's last bytes are not
    lost to a batch too large for them: an account ends its day at most one batch over.
    Every request after it is refused. A batch refused in a race is given back.
    """
    quota = settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY
    if quota <= 0 or size <= 0:
        return 0
    day = _day(now)
    key = _key(account_key, day)
    try:
        if counter_add(key, amount=size, ttl_s=_COUNTER_TTL_S) - size < quota:
            return 0
        cache.decr(key, size)
        return _refused(account_key, day, now)
    except CACHE_ERRORS as exc:
        cache_unreachable(exc)
        return 0


def daily_bytes_refund(*, account_key: str, size: int, now: float) -> None:
    """Give back bytes counted by ``daily_bytes_consume`` for a batch that was not stored."""
    if settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY <= 0 or size <= 0:
        return
    counter_give_back(_key(account_key, _day(now)), size)


def daily_usage(*, team: Team, now: float | None = None) -> IngestUsage:
    """Today's bytes of the team's account, its quota, and its last refusal today."""
    now = time.time() if now is None else now
    day = _day(now)
    account_key = account_of(team=team).key
    resets_at = datetime.fromtimestamp((day + 1) * DAY_S, tz=UTC)
    quota = settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY
    try:
        found = cache.get_many([_key(account_key, day), _refused_key(account_key, day)])
    except CACHE_ERRORS as exc:
        cache_unreachable(exc)
        return IngestUsage(stored_bytes=None, quota_bytes=quota, resets_at=resets_at)
    refused = found.get(_refused_key(account_key, day))
    return IngestUsage(
        stored_bytes=int(found.get(_key(account_key, day)) or 0),
        quota_bytes=quota,
        resets_at=resets_at,
        last_refused_at=None if refused is None else datetime.fromtimestamp(refused, tz=UTC),
    )


def _day(now: float) -> int:
    return int(now // DAY_S)


def _key(account_key: str, day: int) -> str:
    return f"ingest:bytes:{account_key}:{day}"


def _refused_key(account_key: str, day: int) -> str:
    return f"ingest:bytes-refused:{account_key}:{day}"


def _refused(account_key: str, day: int, now: float) -> int:
    """Seconds until midnight UTC, the refusal noted for the ingest page."""
    cache.set(_refused_key(account_key, day), now, timeout=_COUNTER_TTL_S)
    return max(1, math.ceil((day + 1) * DAY_S - now))
