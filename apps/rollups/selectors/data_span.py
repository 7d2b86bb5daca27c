"""Since when a pipeline has data, and how much of a window that covers.

A rate over a window ("traces a minute") or a burn rate over three days means little
when the pipeline has had data for twenty seconds of it: the count is divided by the
time that has data, and a burn-rate window judges only once data covers enough of it.

A pipeline's data starts with its first rollup bucket. Fine buckets are pruned after a
while, so the finest resolution that still holds the very beginning (no coarser bucket
starts before it) tells the start, to 10 s for a young pipeline and to the minute, hour
or day of an old one, whose start is then far behind any window that matters.
"""

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from django.db import connection

from apps.core.sql_arrays import array_literal
from apps.core.time import RESOLUTIONS, align_down, to_seconds
from apps.rollups.models import RollupBucket


def first_data(firsts: Mapping[int, int | None]) -> int | None:
    """The start of the pipeline's data (epoch seconds) from each resolution's first
    bucket start; None without any bucket."""
    for level, resolution in enumerate(RESOLUTIONS):
        first = firsts.get(resolution)
        if first is None:
            continue
        pruned = any(
            (coarser_first := firsts.get(coarser)) is not None
            and coarser_first < align_down(first, coarser)
            for coarser in RESOLUTIONS[level + 1 :]
        )
        if not pruned:
            return first
    return None


def _seconds(value: datetime | None) -> int | None:
    if value is None:
        return None
    return to_seconds(value if value.tzinfo else value.replace(tzinfo=UTC))


def pipelines_data_from(*, pipeline_ids: Sequence[int]) -> dict[int, int | None]:
    """Since when each pipeline has data (epoch seconds), in one statement of one index
    lookup per pipeline and resolution, however many buckets they hold."""
    if not pipeline_ids:
        return {}
    table = RollupBucket._meta.db_table
    columns = ", ".join(
        f"(SELECT bucket_start FROM {table} b WHERE b.pipeline_id = p.id AND b.resolution = "
        f"{int(resolution)} ORDER BY bucket_start ASC LIMIT 1)"
        for resolution in RESOLUTIONS
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT p.id, {columns} FROM unnest(%s::bigint[]) AS p(id)",
            [array_literal(list(pipeline_ids))],
        )
        rows = cursor.fetchall()
    return {
        pipeline_id: first_data(
            {r: _seconds(value) for r, value in zip(RESOLUTIONS, found, strict=True)}
        )
        for pipeline_id, *found in rows
    }


def pipeline_data_from(*, pipeline_id: int) -> int | None:
    return pipelines_data_from(pipeline_ids=[pipeline_id])[pipeline_id]


def seconds_with_data(*, start: int, end: int, data_from: int | None) -> int:
    """How many seconds of ``[start, end)`` come at or after the pipeline's first data."""
    if data_from is None:
        return 0
    return max(0, end - max(start, data_from))


def coverage(*, start: int, end: int, data_from: int | None) -> float:
    """The share of ``[start, end)`` that has data, 0 to 1."""
    if end <= start:
        return 0.0
    return seconds_with_data(start=start, end=end, data_from=data_from) / (end - start)
