"""Stage samples and dirty buckets: created by the rollups app, moved to analysis by state
only, then renamed to analysis's own table names.

A database migrated with the old code keeps its rows through both steps: the tables are
renamed in place, the stage samples still partitioned, their day partitions renamed
with them so that partition maintenance finds and names them as its own.
"""

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.analysis.models import DirtyBucket, StageSample
from apps.core.partitions import partitions_of

BEFORE_MOVE = [("rollups", "0004_quarantined_buckets_and_evaluations"), ("analysis", None)]
BEFORE_RENAME: list[tuple[str, str | None]] = [("analysis", "0002_recompute")]
DAY_NS = 1_700_000_000_000_000_000  # 2023-11-14


def _migrate(targets: list[tuple[str, str | None]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def _latest() -> list[tuple[str, str | None]]:
    executor = MigrationExecutor(connection)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] in ("rollups", "analysis")]


def _relations(prefix: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, relkind FROM pg_class WHERE relname LIKE %s AND relkind IN ('r', 'p')",
            [prefix.replace("_", r"\_") + "%"],
        )
        return dict(cursor.fetchall())


@pytest.fixture(autouse=True)
def _latest_schema_after() -> Iterator[None]:
    latest = _latest()
    yield
    _migrate(latest)
    with connection.cursor() as cursor:
        # The old day is no partition of the suite's: retention would drop it elsewhere.
        cursor.execute('DROP TABLE IF EXISTS "analysis_stagesample_p20231114"')


def _write_old_rows() -> None:
    with connection.cursor() as cursor:
        # A day partition as partition maintenance made them under the old name.
        cursor.execute(
            'CREATE TABLE "rollups_stagesample_p20231114" PARTITION OF "rollups_stagesample" '
            "FOR VALUES FROM (1699920000000000000) TO (1700006400000000000)"
        )
        cursor.execute(
            "INSERT INTO rollups_stagesample (trace_pk, stage_id, start_ns, team_id, "
            "pipeline_id, wall_ns, critical_ns, span_count, error) "
            "VALUES (7, 3, %s, 1, 2, 5000, 4000, 2, false), (8, 3, 5, 1, 2, 10, 10, 1, true)",
            [DAY_NS],
        )
        cursor.execute(
            "INSERT INTO rollups_dirtybucket (pipeline_id, resolution, bucket_start, "
            "marked_at) VALUES (2, 10, '2023-11-14T22:13:20Z', now())"
        )


@pytest.mark.django_db(transaction=True)
def test_rows_written_by_the_rollups_app_are_kept_under_the_analysis_names() -> None:
    latest = _latest()
    _migrate(BEFORE_MOVE)
    _write_old_rows()
    _migrate(latest)
    assert StageSample._meta.db_table == "analysis_stagesample"
    assert DirtyBucket._meta.db_table == "analysis_dirtybucket"
    samples = {(s.trace_pk, s.wall_ns, s.error) for s in StageSample.objects.all()}
    assert samples == {(7, 5000, False), (8, 10, True)}
    assert DirtyBucket.objects.get().pipeline_id == 2
    assert _relations("rollups_stagesample") == {}
    assert _relations("rollups_dirtybucket") == {}
    assert _relations("analysis_stagesample") == {
        "analysis_stagesample": "p",  # still the partitioned table, not a new one
        "analysis_stagesample_default": "r",
        "analysis_stagesample_p20231114": "r",
    }
    assert list(partitions_of("analysis_stagesample").values()) == [
        "analysis_stagesample_p20231114"
    ]
    with connection.cursor() as cursor:
        # The row of that day is in its day partition, the other in the default one.
        cursor.execute("SELECT trace_pk FROM analysis_stagesample_p20231114")
        assert cursor.fetchall() == [(7,)]
        cursor.execute("SELECT trace_pk FROM analysis_stagesample_default")
        assert cursor.fetchall() == [(8,)]


@pytest.mark.django_db(transaction=True)
def test_the_rename_goes_back_with_its_partitions() -> None:
    latest = _latest()
    _migrate(BEFORE_MOVE)
    _write_old_rows()
    _migrate(latest)
    _migrate(BEFORE_RENAME)
    assert _relations("analysis_stagesample") == {}
    assert _relations("rollups_stagesample") == {
        "rollups_stagesample": "p",
        "rollups_stagesample_default": "r",
        "rollups_stagesample_p20231114": "r",
    }
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM rollups_stagesample")
        assert cursor.fetchone() == (2,)
        cursor.execute("SELECT count(*) FROM rollups_dirtybucket")
        assert cursor.fetchone() == (1,)
    _migrate(latest)
    assert StageSample.objects.count() == 2
