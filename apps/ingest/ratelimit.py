"""Admission control for ingestion: a span rate and a backlog share per team.

Both are per team, not per token (a team's editors can mint tokens) and not for
all teams together (one team at its cap must not refuse another's spans). Both
live in the shared cache (Redis in production) so every web process sees the same
counts, and both cost one or two cache round trips per request.
"""

import logging
import math
import time

from django.conf import settings
from django.core.cache import cache
from redis.exceptions import RedisError

from apps.ingest.services.batches import raw_backlog_spans_by_team

# The rate is averaged over fixed windows this long: short enough to stop a
# flood quickly, long enough to let an SDK's bursts of 512 spans through.
WINDOW_S = 5
# Outlives its window, so a counter never expires while requests still use it.
_COUNTER_TTL_S = 2 * WINDOW_S

logger = logging.getLogger(__name__)
# An unreachable cache (Redis restarting) costs the limits their shared counts, not the
# clients their spans: requests are admitted, and the backlog is read from the database.
CACHE_ERRORS = (RedisError, OSError)

BACKLOG_KEY = "ingest:backlog-spans-by-team"
# The backlog is a SUM over pending batches per team; a second-old figure is good enough.
BACKLOG_TTL_S = 1
BACKLOG_RETRY_AFTER_S = 5


def rate_limit_consume(*, team_id: int, spans: int, now: float | None = None) -> int:
    """Count a request's spans against its team; 0 when admitted, else seconds to wait.

    Refused spans are given back, so a client that backs off is not charged for
    the requests it was refused.
    """
    per_second = settings.INGEST_RATE_LIMIT_SPANS
    if per_second <= 0 or spans <= 0:
        return 0
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    key = _key(team_id, window)
    try:
        total = _add_atomically(key, spans)
        # A lone batch larger than a whole window's allowance would otherwise never pass.
        if total <= per_second * WINDOW_S or total == spans:
            return 0
        cache.decr(key, spans)
    except CACHE_ERRORS as exc:
        _cache_unreachable(exc)
        return 0
    return _until_next(window, now)


def rate_limit_wait(*, team_id: int, now: float | None = None) -> int:
    """Seconds to wait when the team's window is already used up, else 0; counts nothing.

    Checked before a body is decompressed: a team whose next span
    ``rate_limit_consume`` would refuse, whatever the body holds, is refused without
    that work.
    """
    per_second = settings.INGEST_RATE_LIMIT_SPANS
    if per_second <= 0:
        return 0
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    try:
        used = cache.get(_key(team_id, window))
    except CACHE_ERRORS as exc:
        _cache_unreachable(exc)
        return 0
    if used is None or int(used) < per_second * WINDOW_S:
        return 0
    return _until_next(window, now)


def _key(team_id: int, window: int) -> str:
    return f"ingest:rate:team:{team_id}:{window}"


def _until_next(window: int, now: float) -> int:
    return max(1, math.ceil((window + 1) * WINDOW_S - now))


def _add_atomically(key: str, amount: int) -> int:
    # add() creates the counter with its expiry only if it is absent (SET NX), and
    # incr() is atomic, so concurrent requests in any process never lose a count.
    for _ in range(2):
        cache.add(key, 0, timeout=_COUNTER_TTL_S)
        try:
            return cache.incr(key, amount)
        except ValueError:  # expired between the two calls
            continue
    return cache.incr(key, amount)


def backlog_full(*, team_id: int) -> bool:
    """Whether this team's accepted spans waiting to be stored are more than it may have.

    A team may hold ``INGEST_MAX_BACKLOG_SPANS_PER_TEAM``. Past the total
    ``INGEST_MAX_BACKLOG_SPANS``, only the teams holding more than an even share of it
    are refused: the teams that caused the backlog wait, the others carry on.
    """
    per_team = settings.INGEST_MAX_BACKLOG_SPANS_PER_TEAM
    total_cap = settings.INGEST_MAX_BACKLOG_SPANS
    if per_team <= 0 and total_cap <= 0:
        return False
    backlog = _backlog_by_team()
    mine = backlog.get(team_id, 0)
    if per_team > 0 and mine > per_team:
        return True
    if total_cap <= 0:
        return False
    total = sum(backlog.values())
    return total > total_cap and mine > total_cap // max(1, len(backlog))


def _backlog_by_team() -> dict[int, int]:
    try:
        backlog = cache.get(BACKLOG_KEY)
    except CACHE_ERRORS as exc:
        _cache_unreachable(exc)
        return raw_backlog_spans_by_team()
    if backlog is None:
        backlog = raw_backlog_spans_by_team()
        try:
            cache.set(BACKLOG_KEY, backlog, timeout=BACKLOG_TTL_S)
        except CACHE_ERRORS as exc:
            _cache_unreachable(exc)
    return dict(backlog)


def _cache_unreachable(exc: BaseException) -> None:
    logger.warning("ingest admission without the shared cache: %s", exc)
