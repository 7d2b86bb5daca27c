"""How full the drain left a trace, remembered in the shared cache for the request path.

The drain is where a trace's limits are enforced (``span_writer``). So that a client
is told its spans were refused, the request path rejects, in ``partial_success``, the
spans a trace has no room for. It asks the shared cache, one round trip per request,
rather than the database: nearly every trace is far from its limits, and a lookup of
each request's traces in PostgreSQL would cost every request. The drain remembers each
trace it leaves at half a limit or more, with what it holds; a trace below that is
filled past a limit only by a request carrying half a trace, which the drain then cuts
and counts, as it does for requests racing for one trace. With the cache unreachable
nothing is rejected at the door, and the drain still cuts.
"""

import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from apps.core.cached import CACHE_ERRORS

logger = logging.getLogger(__name__)

# A trace keeps receiving its late spans for minutes, seldom for an hour.
REMEMBER_S = 3600


@dataclass(frozen=True)
class TraceFill:
    team_id: int
    trace_id: bytes
    pk: int
    spans: int
    size: int
    has_root: bool


def _key(team_id: int, trace_id: bytes) -> str:
    return f"ingest:trace-fill:{team_id}:{trace_id.hex()}"


def trace_fill_remember(*, fills: list[TraceFill]) -> None:
    """Once the drain's transaction commits: what these traces hold, for those at half a
    limit or more."""
    half_spans = settings.INGEST_MAX_SPANS_PER_TRACE / 2
    half_bytes = settings.INGEST_MAX_TRACE_BYTES / 2
    entries = {
        _key(fill.team_id, fill.trace_id): (fill.pk, fill.spans, fill.size, fill.has_root)
        for fill in fills
        if fill.spans >= half_spans or fill.size >= half_bytes
    }
    if not entries:
        return

    def remember() -> None:
        try:
            cache.set_many(entries, timeout=REMEMBER_S)
        except CACHE_ERRORS as exc:
            logger.warning("trace fills not remembered without the shared cache: %s", exc)

    transaction.on_commit(remember)


def trace_fill_among(*, team_id: int, trace_ids: set[bytes]) -> dict[bytes, TraceFill]:
    """What the drain last left in those of a team's traces it remembered, by trace id."""
    keys = {_key(team_id, trace_id): trace_id for trace_id in trace_ids}
    try:
        found = cache.get_many(list(keys))
    except CACHE_ERRORS as exc:
        logger.warning("trace fills unknown without the shared cache: %s", exc)
        return {}
    return {
        keys[key]: TraceFill(team_id, keys[key], pk, spans, size, has_root)
        for key, (pk, spans, size, has_root) in found.items()
    }
