"""Admission control for ingestion: a span rate and a backlog share per account.

Both are per account (apps/teams/accounts.py), not per token (a team's editors can mint
tokens), not per team (anyone may create teams, and a cap per team would multiply with
them) and not for all accounts together (one account at its cap must not refuse
another's spans). Both live in the shared cache so every web process sees the same
counts, and both cost one or two cache round trips per request.
"""

import math
import time

from django.conf import settings
from django.core.cache import cache

from apps.ingest.cache_counts import (
    CACHE_ERRORS,
    cache_unreachable,
    counter_add,
    counter_give_back,
)
from apps.ingest.services.batches import raw_backlog_spans_by_account

# The rate is averaged over fixed windows this long: short enough to stop a
# flood quickly, long enough to let an SDK's bursts of 512 spans through.
WINDOW_S = 5
# Outlives its window, so a counter never expires while requests still use it.
_COUNTER_TTL_S = 2 * WINDOW_S

BACKLOG_KEY = "ingest:backlog-spans-by-account"
# The backlog is a SUM over pending batches per account; a second-old figure is good enough.
BACKLOG_TTL_S = 1
BACKLOG_RETRY_AFTER_S = 5


def rate_limit_consume(*, account_key: str, spans: int, now: float | None = None) -> int:
    """Count a request's spans against its account; 0 when admitted, else seconds to wait.

    Refused spans are given back, so a client that backs off is not charged for
    the requests it was refused.
    """
    per_second = settings.INGEST_RATE_LIMIT_SPANS
    if per_second <= 0 or spans <= 0:
        return 0
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    key = _key(account_key, window)
    try:
        total = counter_add(key, amount=spans, ttl_s=_COUNTER_TTL_S)
        # A lone batch larger than a whole window's allowance would otherwise never pass.
        if total <= per_second * WINDOW_S or total == spans:
            return 0
        cache.decr(key, spans)
    except CACHE_ERRORS as exc:
        cache_unreachable(exc)
        return 0
    return _until_next(window, now)


def rate_limit_refund(*, account_key: str, spans: int, now: float) -> None:
    """Give back spans counted by ``rate_limit_consume`` at ``now`` that were not stored."""
    if settings.INGEST_RATE_LIMIT_SPANS <= 0 or spans <= 0:
        return
    counter_give_back(_key(account_key, int(now // WINDOW_S)), spans)


def rate_limit_wait(*, account_key: str, now: float | None = None) -> int:
    """Seconds to wait when the account's window is already used up, else 0; counts nothing.

    Checked before a body is decompressed: an account whose next span
    ``rate_limit_consume`` would refuse, whatever the body holds, is refused without
    that work.
    """
    per_second = settings.INGEST_RATE_LIMIT_SPANS
    if per_second <= 0:
        return 0
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    try:
        used = cache.get(_key(account_key, window))
    except CACHE_ERRORS as exc:
        cache_unreachable(exc)
        return 0
    if used is None or int(used) < per_second * WINDOW_S:
        return 0
    return _until_next(window, now)


def _key(account_key: str, window: int) -> str:
    return f"ingest:rate:{account_key}:{window}"


def _until_next(window: int, now: float) -> int:
    return max(1, math.ceil((window + 1) * WINDOW_S - now))


def backlog_full(*, account_key: str) -> bool:
    """Whether this account's accepted spans waiting to be stored are more than it may have.

    An account may hold ``INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT``. Past the total
    ``INGEST_MAX_BACKLOG_SPANS``, only the accounts holding more than an even share of it
    are refused: the accounts that caused the backlog wait, the others carry on, however
    many teams each of them has.
    """
    per_account = settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT
    total_cap = settings.INGEST_MAX_BACKLOG_SPANS
    if per_account <= 0 and total_cap <= 0:
        return False
    backlog = _backlog_by_account()
    mine = backlog.get(account_key, 0)
    if per_account > 0 and mine > per_account:
        return True
    if total_cap <= 0:
        return False
    total = sum(backlog.values())
    return total > total_cap and mine > total_cap // max(1, len(backlog))


def _backlog_by_account() -> dict[str, int]:
    try:
        backlog = cache.get(BACKLOG_KEY)
    except CACHE_ERRORS as exc:
        cache_unreachable(exc)
        return raw_backlog_spans_by_account()
    if backlog is None:
        backlog = raw_backlog_spans_by_account()
        try:
            cache.set(BACKLOG_KEY, backlog, timeout=BACKLOG_TTL_S)
        except CACHE_ERRORS as exc:
            cache_unreachable(exc)
    return dict(backlog)
