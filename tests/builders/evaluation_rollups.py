"""Hand-made rollups, traces and stage samples with exactly known values."""

from collections.abc import Iterable
from datetime import UTC, datetime
from itertools import count

import numpy as np
import numpy.typing as npt

from apps.analysis.models import StageSample
from apps.core.time import RESOLUTIONS
from apps.ingest.models import Trace, TraceState
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import E2E_STAGE_ID, Measure, RollupBucket
from apps.rollups.sketches.ddsketch import Sketch
from tests.timing import MS, S

# A Monday at midnight UTC: every tick and bucket boundary falls on whole numbers.
T0 = datetime(2026, 3, 2, tzinfo=UTC)
_ids = count(1)


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0.timestamp() + seconds, tz=UTC)


def ns_at(seconds: float) -> int:
    return int(T0.timestamp()) * S + int(seconds * S)


def put_bucket(
    pipeline: Pipeline,
    stage: Stage | int | None,
    start: datetime,
    values_ms: npt.ArrayLike,
    *,
    resolution: int = 10,
    good: int = 0,
    errors: int = 0,
    measure: int = Measure.WALL,
) -> RollupBucket:
    """A rollup bucket holding exactly ``values_ms``; ``stage`` None is end to end."""
    bucket = bucket_row(
        pipeline,
        stage,
        start,
        values_ms,
        resolution=resolution,
        good=good,
        errors=errors,
        measure=measure,
    )
    bucket.save(force_insert=True)
    return bucket


def bucket_row(
    pipeline: Pipeline,
    stage: Stage | int | None,
    start: datetime,
    values_ms: npt.ArrayLike,
    *,
    resolution: int = 10,
    good: int = 0,
    errors: int = 0,
    measure: int = Measure.WALL,
) -> RollupBucket:
    """``put_bucket``'s row, not yet saved."""
    stage_id = E2E_STAGE_ID if stage is None else stage if isinstance(stage, int) else stage.pk
    values = np.asarray(values_ms, dtype=np.float64)
    sketch = Sketch.from_values(values)
    return RollupBucket(
        team_id=pipeline.team_id,
        pipeline_id=pipeline.pk,
        stage_id=stage_id,
        measure=measure,
        resolution=resolution,
        bucket_start=start,
        count=len(values),
        error_count=errors,
        good_count=good,
        sum_ns=sketch.sum_ns,
        max_ns=round(float(values.max()) * MS) if len(values) else 0,
        sketch=sketch.to_bytes(),
    )


def put_requests(pipeline: Pipeline, moment: datetime, *, total: int, good: int) -> None:
    """``total`` end-to-end values, ``good`` of them within the objective, in the 10 s
    bucket holding ``moment``, added at every resolution as the rollups keep them."""
    epoch = int(moment.timestamp())
    for resolution in RESOLUTIONS:
        start = datetime.fromtimestamp(epoch - epoch % resolution, tz=UTC)
        bucket = RollupBucket.objects.filter(
            pipeline_id=pipeline.pk, stage_id=0, resolution=resolution, bucket_start=start
        ).first()
        if bucket is None:
            put_bucket(pipeline, None, start, [100.0] * total, resolution=resolution, good=good)
        else:
            bucket.count += total
            bucket.good_count += good
            bucket.save()


def put_requests_at(
    pipeline: Pipeline, moments: Iterable[datetime], *, total: int, good: int
) -> None:
    """``put_requests`` at each of ``moments`` in turn, in a few statements rather than
    two per moment and resolution: the rows end as they would."""
    stored = {
        (bucket.resolution, bucket.bucket_start): bucket
        for bucket in RollupBucket.objects.filter(pipeline_id=pipeline.pk, stage_id=E2E_STAGE_ID)
    }
    created: dict[tuple[int, datetime], RollupBucket] = {}
    changed: dict[tuple[int, datetime], RollupBucket] = {}
    for moment in moments:
        epoch = int(moment.timestamp())
        for resolution in RESOLUTIONS:
            start = datetime.fromtimestamp(epoch - epoch % resolution, tz=UTC)
            key = (resolution, start)
            bucket = stored.get(key) or created.get(key)
            if bucket is None:
                created[key] = bucket_row(
                    pipeline, None, start, [100.0] * total, resolution=resolution, good=good
                )
                continue
            bucket.count += total
            bucket.good_count += good
            if key in stored:
                changed[key] = bucket
    RollupBucket.objects.bulk_create(created.values())
    RollupBucket.objects.bulk_update(changed.values(), ["count", "good_count"])


def make_trace(
    pipeline: Pipeline,
    *,
    start_ns: int,
    duration_ms: float,
    untracked_ms: float = 0,
    incomplete: bool = False,
    finalized: bool = True,
) -> Trace:
    number = next(_ids)
    return Trace.objects.create(
        team_id=pipeline.team_id,
        trace_id=number.to_bytes(16, "big"),
        state=TraceState.FINALIZED if finalized else TraceState.OPEN,
        first_seen_at=T0,
        last_span_at=T0,
        span_count=1,
        root_span_id=None if incomplete else number.to_bytes(8, "big"),
        start_ns=start_ns,
        end_ns=start_ns + round(duration_ms * MS),
        pipeline=pipeline,
        incomplete=incomplete,
        untracked_critical_ns=round(untracked_ms * MS),
        finalized_at=T0 if finalized else None,
    )


def make_sample(
    trace: Trace, stage: Stage, wall_ms: float, critical_ms: float | None = None
) -> StageSample:
    assert trace.start_ns is not None
    return StageSample.objects.create(
        trace_pk=trace.pk,
        stage_id=stage.pk,
        start_ns=trace.start_ns,
        team_id=trace.team_id,
        pipeline_id=stage.pipeline_id,
        wall_ns=round(wall_ms * MS),
        critical_ns=round((wall_ms if critical_ms is None else critical_ms) * MS),
        span_count=1,
    )


def hex_id(trace: Trace) -> str:
    return bytes(trace.trace_id).hex()


def put_rollup(
    pipeline: Pipeline, stage: Stage | int | None, start: datetime, values_ms: npt.ArrayLike
) -> RollupBucket:
    """A 10 s bucket of ``values_ms`` and its minute bucket updated to match, as rollups do."""
    bucket = put_bucket(pipeline, stage, start, values_ms)
    seconds = int(start.timestamp())
    minute_start = datetime.fromtimestamp(seconds - seconds % 60, tz=UTC)
    children = RollupBucket.objects.filter(
        pipeline_id=pipeline.pk,
        stage_id=bucket.stage_id,
        measure=Measure.WALL,
        resolution=10,
        bucket_start__gte=minute_start,
        bucket_start__lt=datetime.fromtimestamp(minute_start.timestamp() + 60, tz=UTC),
    )
    merged = Sketch.merged(Sketch.from_bytes(bytes(child.sketch)) for child in children)
    RollupBucket.objects.update_or_create(
        pipeline_id=pipeline.pk,
        stage_id=bucket.stage_id,
        measure=Measure.WALL,
        resolution=60,
        bucket_start=minute_start,
        defaults={
            "team_id": pipeline.team_id,
            "count": merged.count,
            "sum_ns": merged.sum_ns,
            "max_ns": round((merged.max or 0) * MS),
            "sketch": merged.to_bytes(),
        },
    )
    return bucket
