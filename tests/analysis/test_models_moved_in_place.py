"""Stage samples and dirty buckets moved from rollups to analysis by state only.

An existing database migrates in place: the tables keep their names and their rows,
and nothing is rewritten.
"""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.analysis.models import DirtyBucket, StageSample

BEFORE = [("rollups", "0004_quarantined_buckets_and_evaluations"), ("analysis", None)]


def _migrate(targets: list[tuple[str, str | None]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def _latest() -> list[tuple[str, str | None]]:
    executor = MigrationExecutor(connection)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] in ("rollups", "analysis")]


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_move_are_read_through_the_analysis_models() -> None:
    latest = _latest()
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO rollups_stagesample (trace_pk, stage_id, start_ns, team_id, "
                "pipeline_id, wall_ns, critical_ns, span_count, error) "
                "VALUES (7, 3, 1700000000000000000, 1, 2, 5000, 4000, 2, false)"
            )
            cursor.execute(
                "INSERT INTO rollups_dirtybucket (pipeline_id, resolution, bucket_start, "
                "marked_at) VALUES (2, 10, '2023-11-14T22:13:20Z', now())"
            )
    finally:
        _migrate(latest)
    assert StageSample._meta.db_table == "rollups_stagesample"
    assert DirtyBucket._meta.db_table == "rollups_dirtybucket"
    sample = StageSample.objects.get()
    assert (sample.trace_pk, sample.stage_id, sample.wall_ns, sample.critical_ns) == (
        7,
        3,
        5000,
        4000,
    )
    assert DirtyBucket.objects.get().pipeline_id == 2
    with connection.cursor() as cursor:
        # Still the partitioned table the rollups app created, not a new one.
        cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'rollups_stagesample'")
        assert cursor.fetchone() == ("p",)
