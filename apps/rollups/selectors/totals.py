"""Counts since a pipeline began, from its day buckets: traces, errors, traces within the
objective, and each stage's samples.

Day buckets are kept for ever (``retention``) and only ever rewritten from their
children, which hold at least what they held before; so their sums grow with every
trace rolled up and never shrink, unless traces are analyzed again under other rules.
That is what a Prometheus counter needs.
"""

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Sum

from apps.core.sql_arrays import column_in
from apps.rollups.models import E2E_STAGE_ID, Measure, RollupBucket

DAY = 86400


@dataclass(frozen=True)
class Totals:
    count: int = 0
    errors: int = 0
    good: int = 0

    def __add__(self, other: "Totals") -> "Totals":
        return Totals(self.count + other.count, self.errors + other.errors, self.good + other.good)


def day_bucket_totals(
    *,
    pipeline_ids: Collection[int],
    stage_ids: Collection[int],
    since: datetime | None = None,
    before: datetime | None = None,
) -> dict[tuple[int, int], Totals]:
    """Sums of the wall-time day buckets of these pipelines' end-to-end figures and of
    these stages, starting in ``[since, before)`` (either end open when None), by
    (pipeline id, stage id); E2E_STAGE_ID holds the traces. One statement."""
    if not pipeline_ids:
        return {}
    rows = RollupBucket.objects.filter(
        column_in(RollupBucket, "pipeline_id", pipeline_ids),
        column_in(RollupBucket, "stage_id", [*stage_ids, E2E_STAGE_ID]),
        resolution=DAY,
        measure=Measure.WALL,
    )
    if since is not None:
        rows = rows.filter(bucket_start__gte=since)
    if before is not None:
        rows = rows.filter(bucket_start__lt=before)
    sums = (
        rows.values("pipeline_id", "stage_id")
        .order_by()
        .annotate(total=Sum("count"), errors=Sum("error_count"), good=Sum("good_count"))
    )
    return {
        (row["pipeline_id"], row["stage_id"]): Totals(row["total"], row["errors"], row["good"])
        for row in sums
    }
