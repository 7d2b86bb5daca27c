"""How long each rollup resolution is kept, and what a coarser bucket is rebuilt from.

* 10-second buckets: 2 hours. They serve the freshest views and the minute merge;
  older windows read minutes.
* Minute buckets: 3 days, enough for 24-hour series at minute steps.
* Ten-minute buckets: 3 days too, as their children: a day's chart and the edges of
  windows within those days read them; older windows read hours.
* Hour buckets: SAMPLE_RETENTION_DAYS + 1 days, so the day merge of the oldest day
  still holding samples finds all its hours.
* Day buckets: kept. A pipeline has 42 rows a day (20 stages x 2 measures + end to
  end + untracked), a few hundred bytes each: years of history cost little, and
  they are all that is left once samples expire.

A dirty coarser bucket is merged from its children while they are all still kept
(with a margin, so retention running meanwhile cannot take one away); otherwise it is
recomputed from stage samples while those cover it; otherwise there is nothing left
to recompute it from and it stays as it is.
"""

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Literal

from django.conf import settings
from django.utils import timezone

from apps.core.time import RESOLUTIONS
from apps.rollups.models import LlmBucket, RollupBucket

FINE_KEEP = timedelta(hours=2)
MINUTE_KEEP = timedelta(days=3)
# Children this close to their retention cutoff are not trusted to be all there.
MERGE_MARGIN = timedelta(minutes=10)

PARENT = dict(pairwise(RESOLUTIONS))
CHILD = {parent: child for child, parent in PARENT.items()}

Source = Literal["samples", "children", "expired", "keep"]


def retention(resolution: int) -> timedelta | None:
    """How long buckets of ``resolution`` seconds are kept; None for ever."""
    keep = {
        10: FINE_KEEP,
        60: MINUTE_KEEP,
        600: MINUTE_KEEP,
        3600: timedelta(days=settings.SAMPLE_RETENTION_DAYS + 1),
    }
    return keep.get(resolution)


def kept_since(resolution: int, now: datetime) -> datetime | None:
    keep = retention(resolution)
    return None if keep is None else now - keep


def samples_kept_since(now: datetime) -> datetime:
    """Start of the oldest day whose samples survive the next storage maintenance.

    Storage drops the days before ``today - SAMPLE_RETENTION_DAYS``; one day more
    covers a maintenance run after midnight.
    """
    day = (now.astimezone(UTC) - timedelta(days=settings.SAMPLE_RETENTION_DAYS - 1)).date()
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def bucket_source(resolution: int, start: datetime, now: datetime) -> Source:
    """Where a dirty bucket's new contents come from.

    ``expired``: a finest bucket past its retention is not written again (its
    parent is still recomputed). ``keep``: neither children nor samples cover the
    bucket any more, so its rows stay as they are.
    """
    if resolution == RESOLUTIONS[0]:
        horizon = kept_since(resolution, now)
        return "samples" if horizon is None or start >= horizon else "expired"
    children_since = kept_since(CHILD[resolution], now)
    if children_since is None or start >= children_since + MERGE_MARGIN:
        return "children"
    if start >= samples_kept_since(now):
        return "samples"
    return "keep"


def rollups_expire(*, now: datetime | None = None) -> dict[int, int]:
    """Delete buckets past their resolution's retention; rows deleted per resolution."""
    now = now or timezone.now()
    deleted = {}
    for resolution in RESOLUTIONS:
        cutoff = kept_since(resolution, now)
        if cutoff is None:
            continue
        deleted[resolution] = sum(
            model.objects.filter(resolution=resolution, bucket_start__lt=cutoff).delete()[0]
            for model in (RollupBucket, LlmBucket)
        )
    return deleted
