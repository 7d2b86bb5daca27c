"""A database whose rollups predate ten-minute buckets gains them from its minutes."""

from datetime import UTC, datetime

import numpy as np
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.analysis.models import DirtyBucket
from apps.rollups.models import RollupBucket
from apps.rollups.services.bucket_pass import rollups_process_dirty
from tests.builders.configuration import make_team
from tests.builders.samples_and_rollups import (
    NEW_YEAR_S,
    add_random_traces,
    assert_rollups_exact,
    make_rollup_pipeline,
    snapshot,
)
from tests.timing import S

BEFORE = [("rollups", "0005_samples_and_dirty_buckets_to_analysis")]
SOON_AFTER = datetime.fromtimestamp(NEW_YEAR_S + 1800, tz=UTC)


def _latest() -> list[tuple[str, str]]:
    """The ten-minute buckets and every migration after them (analysis's tables renamed
    among them), so that the tests after this one find the schema as it is."""
    executor = MigrationExecutor(connection)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] in ("rollups", "analysis")]


def _migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.mark.django_db(transaction=True)
def test_the_migration_marks_the_ten_minutes_of_every_minute_and_the_pass_builds_them() -> None:
    pipeline, stages = make_rollup_pipeline(make_team(), "rag", stages=3)
    # Twenty-five minutes across midnight: three ten-minute slots, two hours, two days.
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(3), n=400,
        from_ns=(NEW_YEAR_S - 12 * 60) * S, span_s=25 * 60,
    )  # fmt: skip
    rollups_process_dirty(now=SOON_AFTER)
    built = snapshot([pipeline.pk])
    _migrate(BEFORE)  # as the database was: no ten-minute buckets
    try:
        assert not RollupBucket.objects.filter(resolution=600).exists()
        before = snapshot([pipeline.pk])
    finally:
        _migrate(_latest())

    marked = sorted(
        int(start.timestamp()) - NEW_YEAR_S
        for start in DirtyBucket.objects.filter(resolution=600).values_list(
            "bucket_start", flat=True
        )
    )
    assert marked == [-20 * 60, -10 * 60, 0, 10 * 60]
    assert snapshot([pipeline.pk]) == before  # nothing read differently until rebuilt

    rollups_process_dirty(now=SOON_AFTER)

    assert not DirtyBucket.objects.exists()
    assert assert_rollups_exact(pipeline) > 0
    # The hours rebuilt from ten minutes are the hours built from minutes.
    assert snapshot([pipeline.pk]) == built
