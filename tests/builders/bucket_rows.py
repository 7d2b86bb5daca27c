"""Rollup rows written directly from hand-made traces, at chosen resolutions.

Each trace has an end-to-end time and per-stage wall and critical-path times;
its untracked critical-path time is what the stages leave of the end-to-end
time, so the stages' critical sums plus untracked equal the end-to-end sum.
"""

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
from django.db import connection

from apps.core.time import RESOLUTIONS
from apps.pipelines.models import Pipeline
from apps.rollups.models import E2E_STAGE_ID, UNTRACKED_STAGE_ID, Measure, RollupBucket
from apps.rollups.sketches.ddsketch import Sketch
from tests.timing import MS


@dataclass
class HandTrace:
    """``start`` in epoch seconds; times in nanoseconds; ``stages`` maps a stage id to
    (wall, critical)."""

    start: int
    e2e_ns: int
    stages: dict[int, tuple[int, int]] = field(default_factory=dict)
    error: bool = False

    @property
    def untracked_ns(self) -> int:
        return self.e2e_ns - sum(critical for _, critical in self.stages.values())


def row(
    *,
    pipeline: Pipeline,
    stage_id: int,
    measure: int,
    resolution: int,
    start: int,
    values_ns: Sequence[int],
    errors: int = 0,
    good: int = 0,
) -> RollupBucket:
    return RollupBucket(
        team_id=pipeline.team_id,
        pipeline_id=pipeline.pk,
        stage_id=stage_id,
        measure=measure,
        resolution=resolution,
        bucket_start=datetime.fromtimestamp(start, tz=UTC),
        count=len(values_ns),
        error_count=errors,
        good_count=good,
        sum_ns=sum(values_ns),
        max_ns=max(values_ns),
        sketch=Sketch.from_values(np.asarray(values_ns, dtype=np.float64) / MS).to_bytes(),
    )


Keep = Callable[[int, int], bool]


def store_rollups(
    pipeline: Pipeline,
    traces: Iterable[HandTrace],
    *,
    resolutions: Sequence[int] = RESOLUTIONS,
    keep: Keep | None = None,
    objective_ns: int | None = None,
) -> None:
    """Rows at each resolution for these traces; ``keep(resolution, start)`` drops buckets.
    With ``objective_ns``, end-to-end rows count the traces within it as good."""
    series: dict[tuple[int, int, int, int], list[tuple[int, bool]]] = defaultdict(list)
    for trace in traces:
        for resolution in resolutions:
            bucket = trace.start - trace.start % resolution
            if keep is not None and not keep(resolution, bucket):
                continue
            series[(E2E_STAGE_ID, Measure.WALL, resolution, bucket)].append(
                (trace.e2e_ns, trace.error)
            )
            series[(UNTRACKED_STAGE_ID, Measure.CRITICAL, resolution, bucket)].append(
                (trace.untracked_ns, False)
            )
            for stage_id, (wall, critical) in trace.stages.items():
                series[(stage_id, Measure.WALL, resolution, bucket)].append((wall, False))
                series[(stage_id, Measure.CRITICAL, resolution, bucket)].append((critical, False))
    rows = [
        row(
            pipeline=pipeline,
            stage_id=stage_id,
            measure=measure,
            resolution=resolution,
            start=start,
            values_ns=[value for value, _ in items],
            errors=sum(error for _, error in items),
            good=sum(value <= objective_ns for value, _ in items)
            if objective_ns is not None and stage_id == E2E_STAGE_ID
            else 0,
        )
        for (stage_id, measure, resolution, start), items in sorted(series.items())
    ]
    copy_rows(rows)


def copy_rows(rows: Iterable[RollupBucket]) -> None:
    """``bulk_create`` by COPY: an INSERT of thousands of rows spends most of its time
    assembling and binding the statement, COPY none; the rows (and their ids) are as
    the INSERT writes them."""
    fields = [f for f in RollupBucket._meta.concrete_fields if not f.primary_key]
    table = connection.ops.quote_name(RollupBucket._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in fields)
    sql = f"COPY {table} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(
                [f.get_db_prep_save(f.pre_save(row, add=True), connection) for f in fields]
            )


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The exact nearest-rank percentile: the sample at 1-based rank ceil(q * n)."""
    ordered = sorted(values)
    rank = max(1, -(-round(q * 1000) * len(ordered) // 1000))
    return ordered[rank - 1]
