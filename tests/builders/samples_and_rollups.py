"""Finalized traces and stage samples written directly, and rollups computed the slow way.

Rows are written as finalization writes them (samples replaced, buckets marked
dirty), so that tests control every value exactly.
"""

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import count

import numpy as np
from django.utils import timezone

from apps.analysis.models import StageSample
from apps.analysis.services.dirty_buckets import dirty_buckets_mark
from apps.core.time import RESOLUTIONS
from apps.ingest.models import Trace, TraceState
from apps.pipelines.models import Pipeline
from apps.rollups.models import E2E_STAGE_ID, UNTRACKED_STAGE_ID, Measure, RollupBucket
from apps.rollups.sketches.ddsketch import Sketch
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_stage
from tests.timing import MS, S

# 2030-01-01T00:00:00Z: data placed around it crosses minute, hour and day boundaries.
NEW_YEAR_S = 1_893_456_000
_trace_ids = count(1)

# Stage id -> (wall ns, critical ns, error).
StageValues = Mapping[int, tuple[int, int, bool]]


def make_rollup_pipeline(
    team: Team, slug: str, *, stages: int = 3, objective_ms: int | None = None
) -> tuple[Pipeline, list[int]]:
    fields = {}
    if objective_ms is not None:
        fields = {"objective_target": "99.000", "objective_threshold_ms": objective_ms}
    pipeline = make_pipeline(team, slug, **fields)
    stage_ids = [make_stage(pipeline, f"{slug}-s{i}").pk for i in range(stages)]
    return pipeline, stage_ids


def _trace(
    pipeline: Pipeline,
    start_ns: int,
    e2e_ns: int,
    *,
    error: bool,
    untracked_ns: int,
    incomplete: bool,
) -> Trace:
    now = timezone.now()
    return Trace(
        team_id=pipeline.team_id,
        trace_id=next(_trace_ids).to_bytes(16, "big"),
        state=TraceState.FINALIZED,
        first_seen_at=now,
        last_span_at=now,
        span_count=1,
        root_span_id=b"\x01" * 8,
        start_ns=start_ns,
        end_ns=start_ns + e2e_ns,
        pipeline=pipeline,
        incomplete=incomplete,
        error=error,
        untracked_critical_ns=untracked_ns,
        finalized_at=now,
        revision=1,
    )


def _samples(trace: Trace, stages: StageValues) -> list[StageSample]:
    assert trace.start_ns is not None
    assert trace.pipeline_id is not None
    return [
        StageSample(
            trace_pk=trace.pk, stage_id=stage_id, start_ns=trace.start_ns,
            team_id=trace.team_id, pipeline_id=trace.pipeline_id, wall_ns=wall,
            critical_ns=critical, span_count=1, error=error,
        )
        for stage_id, (wall, critical, error) in stages.items()
    ]  # fmt: skip


def add_trace(
    pipeline: Pipeline,
    start_ns: int,
    e2e_ns: int,
    stages: StageValues,
    *,
    error: bool = False,
    untracked_ns: int = 0,
    incomplete: bool = False,
) -> Trace:
    trace = _trace(
        pipeline, start_ns, e2e_ns, error=error, untracked_ns=untracked_ns, incomplete=incomplete
    )
    trace.save()
    if not incomplete:
        StageSample.objects.bulk_create(_samples(trace, stages))
    dirty_buckets_mark([(pipeline.pk, start_ns)])
    return trace


def add_random_traces(
    pipeline: Pipeline, stage_ids: list[int], *, rng: np.random.Generator, n: int,
    from_ns: int, span_s: float,
) -> list[Trace]:  # fmt: skip
    """``n`` traces with lognormal times starting uniformly over ``span_s`` seconds."""
    starts = from_ns + (rng.random(n) * span_s * S).astype(np.int64)
    e2e = (rng.lognormal(np.log(800), 0.6, n) * MS).astype(np.int64)
    traces = [
        _trace(pipeline, int(start), int(total), error=bool(rng.random() < 0.05),
               untracked_ns=int(total * rng.random() * 0.1), incomplete=False)
        for start, total in zip(starts, e2e, strict=True)
    ]  # fmt: skip
    Trace.objects.bulk_create(traces)
    samples = []
    for trace in traces:
        present = [s for s in stage_ids if rng.random() < 0.9]
        walls = (rng.lognormal(np.log(150), 0.8, len(present)) * MS).astype(np.int64)
        stages = {
            stage: (int(wall), int(wall * rng.random()), bool(rng.random() < 0.03))
            for stage, wall in zip(present, walls, strict=True)
        }
        samples += _samples(trace, stages)
    StageSample.objects.bulk_create(samples, batch_size=2000)
    dirty_buckets_mark([(pipeline.pk, int(start)) for start in starts])
    return traces


def refinalize(
    trace: Trace,
    *,
    pipeline: Pipeline,
    start_ns: int,
    e2e_ns: int,
    stages: StageValues,
    error: bool = False,
    untracked_ns: int = 0,
) -> None:
    """What finalizing again after late spans does: old and new buckets marked dirty,
    samples replaced, the trace summary rewritten."""
    dirty_buckets_mark([(trace.pipeline_id, trace.start_ns), (pipeline.pk, start_ns)])
    StageSample.objects.filter(trace_pk=trace.pk).delete()
    trace.pipeline, trace.start_ns, trace.end_ns = pipeline, start_ns, start_ns + e2e_ns
    trace.error, trace.untracked_critical_ns = error, untracked_ns
    trace.revision += 1
    trace.save()
    StageSample.objects.bulk_create(_samples(trace, stages))


@dataclass
class Expected:
    values: list[int] = field(default_factory=list)
    errors: int = 0
    good: int = 0


Key = tuple[datetime, int, int]


def expected_rollups(pipeline: Pipeline, resolution: int) -> dict[Key, Expected]:
    """Every bucket of ``resolution`` computed straight from traces and samples."""

    def bucket(start_ns: int) -> datetime:
        seconds = start_ns // S
        return datetime.fromtimestamp(seconds - seconds % resolution, tz=UTC)

    pipeline.refresh_from_db()
    threshold = pipeline.objective_threshold_ms
    out: dict[Key, Expected] = defaultdict(Expected)
    for trace in Trace.objects.filter(pipeline=pipeline, incomplete=False):
        assert trace.start_ns is not None
        assert trace.end_ns is not None
        e2e = out[(bucket(trace.start_ns), E2E_STAGE_ID, Measure.WALL)]
        value = trace.end_ns - trace.start_ns
        e2e.values.append(value)
        e2e.errors += trace.error
        e2e.good += threshold is not None and value <= threshold * MS
        untracked = out[(bucket(trace.start_ns), UNTRACKED_STAGE_ID, Measure.CRITICAL)]
        untracked.values.append(trace.untracked_critical_ns)
        untracked.errors += trace.error
    for sample in StageSample.objects.filter(pipeline_id=pipeline.pk):
        for measure, value in (
            (Measure.WALL, sample.wall_ns),
            (Measure.CRITICAL, sample.critical_ns),
        ):
            expected = out[(bucket(sample.start_ns), sample.stage_id, measure)]
            expected.values.append(value)
            expected.errors += sample.error
    return dict(out)


def stored_rollups(pipeline: Pipeline, resolution: int) -> dict[Key, RollupBucket]:
    rows = RollupBucket.objects.filter(pipeline_id=pipeline.pk, resolution=resolution)
    return {(row.bucket_start, row.stage_id, row.measure): row for row in rows}


def assert_rollups_exact(pipeline: Pipeline, resolutions: tuple[int, ...] = RESOLUTIONS) -> int:
    """Stored buckets equal the direct computation at every resolution; returns the
    number of buckets compared."""
    compared = 0
    for resolution in resolutions:
        expected, stored = (
            expected_rollups(pipeline, resolution),
            stored_rollups(pipeline, resolution),
        )
        assert stored.keys() == expected.keys(), f"buckets differ at {resolution} s"
        for key, want in expected.items():
            row = stored[key]
            values = np.array(want.values, dtype=np.int64)
            assert row.team_id == pipeline.team_id
            assert (row.count, row.error_count, row.good_count) == (
                len(values),
                want.errors,
                want.good,
            )
            assert (row.sum_ns, row.max_ns) == (int(values.sum()), int(values.max()))
            sketch, direct = Sketch.from_bytes(bytes(row.sketch)), Sketch.from_values(values / MS)
            assert sketch == direct
            assert sketch.quantiles([0.5, 0.9, 0.95, 0.99]) == direct.quantiles(
                [0.5, 0.9, 0.95, 0.99]
            )
            compared += 1
    return compared


def snapshot(pipeline_ids: list[int]) -> set[tuple[object, ...]]:
    """Every rollup row of these pipelines, comparable across runs."""
    rows = RollupBucket.objects.filter(pipeline_id__in=pipeline_ids).values_list(
        "pipeline_id", "stage_id", "measure", "resolution", "bucket_start", "count",
        "error_count", "good_count", "sum_ns", "max_ns", "sketch",
    )  # fmt: skip
    return {(*row[:-1], bytes(row[-1])) for row in rows}
