"""Several pipelines read at once give each pipeline's own figures, in a fixed number of
statements: what the team home reads."""

from datetime import UTC, datetime

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.pipelines.models import Pipeline
from apps.rollups.models import E2E_STAGE_ID, Measure
from apps.rollups.selectors import pipeline_percentiles, pipeline_series
from apps.rollups.selectors.percentiles import pipelines_percentiles
from apps.rollups.selectors.series import pipelines_series
from tests.builders.bucket_rows import HandTrace, store_rollups
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld
from tests.timing import MS

START = int(datetime(2025, 3, 3, 9, 58, 50, tzinfo=UTC).timestamp())
END = START + 3 * 3600 + 130  # ragged: 10 s, minute and hour buckets are all read


def _pipelines(world: TeamWorld, count: int, *, pruned: int | None = None) -> list[Pipeline]:
    rng = np.random.default_rng(9)
    pipelines = []
    for number in range(count):
        pipeline = make_pipeline(world.team, f"p{number}", budget={"p95": 800})
        stages = [make_stage(pipeline, f"s{i}", budget_ms=200) for i in range(3)]
        traces = []
        for start in sorted(int(s) for s in rng.integers(START - 900, END + 900, 400)):
            walls = [int(rng.lognormal(np.log(100 + 60 * i), 0.5) * MS) for i in range(3)]
            traces.append(
                HandTrace(
                    start=start,
                    e2e_ns=sum(walls) + 5 * MS,
                    stages={s.pk: (w, w) for s, w in zip(stages, walls, strict=True)},
                    error=rng.random() < 0.05,
                )
            )
        # One pipeline's 10-second buckets pruned: it is tiled differently from the others.
        keep = (lambda res, _: res != 10) if number == pruned else None
        store_rollups(pipeline, traces, keep=keep)
        pipelines.append(pipeline)
    return pipelines


@pytest.mark.parametrize("count", [1, 5])
def test_each_pipeline_gets_what_it_would_get_alone(world: TeamWorld, count: int) -> None:
    pipelines = _pipelines(world, count, pruned=count - 1)
    together = pipelines_percentiles(pipelines=pipelines, start=START, end=END)
    for pipeline in pipelines:
        alone = pipeline_percentiles(pipeline=pipeline, start=START, end=END)
        assert together[pipeline.pk] == alone
    lines = pipelines_series(pipelines=pipelines, stage_id=E2E_STAGE_ID, measure=Measure.WALL,
                             quantile=0.95, start=START, end=END, max_points=25)  # fmt: skip
    for pipeline in pipelines:
        alone_line = pipeline_series(pipeline=pipeline, stage_id=E2E_STAGE_ID,
                                     measure=Measure.WALL, quantile=0.95, start=START, end=END,
                                     max_points=25)  # fmt: skip
        assert lines[pipeline.pk] == alone_line


def test_without_critical_sketches_shares_and_means_are_unchanged(world: TeamWorld) -> None:
    pipelines = _pipelines(world, 3)
    full = pipelines_percentiles(pipelines=pipelines, start=START, end=END)
    lean = pipelines_percentiles(pipelines=pipelines, start=START, end=END, critical_sketches=False)
    for pipeline in pipelines:
        a, b = full[pipeline.pk], lean[pipeline.pk]
        assert a.e2e_percentiles == b.e2e_percentiles
        assert a.untracked_share == b.untracked_share
        for x, y in zip(a.stages, b.stages, strict=True):
            assert x.percentiles == y.percentiles
            assert x.share == y.share
            assert x.critical.mean_ms == y.critical.mean_ms
            assert (x.critical.count, x.critical.sum_ns) == (y.critical.count, y.critical.sum_ns)


def test_the_statements_do_not_grow_with_the_pipelines(world: TeamWorld) -> None:
    few = _pipelines(world, 2)
    with CaptureQueriesContext(connection) as two:
        pipelines_percentiles(pipelines=few, start=START, end=END, critical_sketches=False)
        pipelines_series(pipelines=few, stage_id=E2E_STAGE_ID, measure=Measure.WALL,
                         quantile=0.5, start=START, end=END)  # fmt: skip
    many = few + _pipelines_more(world)
    with CaptureQueriesContext(connection) as eight:
        pipelines_percentiles(pipelines=many, start=START, end=END, critical_sketches=False)
        pipelines_series(pipelines=many, stage_id=E2E_STAGE_ID, measure=Measure.WALL,
                         quantile=0.5, start=START, end=END)  # fmt: skip
    assert len(eight) == len(two)


def _pipelines_more(world: TeamWorld) -> list[Pipeline]:
    extra = []
    for number in range(6):
        pipeline = make_pipeline(world.team, f"extra{number}", budget={"p95": 800})
        make_stage(pipeline, "only", budget_ms=100)
        extra.append(pipeline)
    return extra
