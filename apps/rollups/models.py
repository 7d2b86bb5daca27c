"""Per-trace stage samples: the input of rollups and budget evaluation.

Partitioned by day of trace start on PostgreSQL, like spans; a trace finalized
again (late spans) replaces its samples, keyed by (trace_pk, stage_id, start_ns).
"""

from django.db import models


class StageSample(models.Model):
    """One finalized trace's time in one stage of its pipeline."""

    pk = models.CompositePrimaryKey("trace_pk", "stage_id", "start_ns")
    trace_pk = models.BigIntegerField()
    stage_id = models.BigIntegerField()
    start_ns = models.BigIntegerField(help_text="Start of the trace's root span.")
    team_id = models.BigIntegerField()
    pipeline_id = models.BigIntegerField()
    wall_ns = models.BigIntegerField(help_text="Union of the stage's span intervals.")
    critical_ns = models.BigIntegerField(help_text="The stage's share of the critical path.")
    span_count = models.PositiveIntegerField()
    error = models.BooleanField(default=False)

    class Meta:
        indexes = [
            models.Index(fields=["pipeline_id", "start_ns"], name="stagesample_pipeline_start"),
        ]

    def __str__(self) -> str:
        return f"trace {self.trace_pk} stage {self.stage_id}: {self.wall_ns} ns"


class Measure(models.IntegerChoices):
    WALL = 1, "wall"
    CRITICAL = 2, "critical"


# Pseudo stage ids in rollups: the whole trace, and critical-path time in no stage.
E2E_STAGE_ID = 0
UNTRACKED_STAGE_ID = -1

# Bucket widths in seconds; coarser buckets are merged from finer ones.
RESOLUTIONS = (10, 60, 3600, 86400)


class RollupBucket(models.Model):
    """Counts, sums and a relative-error sketch of one measure in one time bucket.

    ``stage_id`` is a Stage id, or E2E_STAGE_ID for end-to-end durations (measure
    wall), or UNTRACKED_STAGE_ID for critical-path time in no stage. Values are
    nanoseconds in ``sum_ns``/``max_ns`` and milliseconds inside ``sketch``.
    ``good_count`` counts end-to-end values within the pipeline's objective
    threshold (0 elsewhere).
    """

    team_id = models.BigIntegerField()
    pipeline_id = models.BigIntegerField()
    stage_id = models.BigIntegerField()
    measure = models.PositiveSmallIntegerField(choices=Measure.choices)
    resolution = models.PositiveIntegerField(help_text="Bucket width in seconds.")
    bucket_start = models.DateTimeField()
    count = models.PositiveIntegerField()
    error_count = models.PositiveIntegerField(default=0)
    good_count = models.PositiveIntegerField(default=0)
    sum_ns = models.BigIntegerField()
    max_ns = models.BigIntegerField()
    sketch = models.BinaryField()
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline_id", "stage_id", "measure", "resolution", "bucket_start"],
                name="rollupbucket_unique_key",
            )
        ]
        indexes = [
            models.Index(
                fields=["pipeline_id", "resolution", "bucket_start"],
                name="rollupbucket_pipeline_time",
            )
        ]

    def __str__(self) -> str:
        return f"p{self.pipeline_id}/s{self.stage_id}/{self.resolution}s@{self.bucket_start}"


class DirtyBucket(models.Model):
    """A pipeline's bucket whose samples changed and whose rollups must be recomputed.

    Written in the same transaction as the samples; the rollup job deletes the row
    in the transaction that rewrites the bucket, so a crash leaves it to redo.
    """

    pipeline_id = models.BigIntegerField()
    resolution = models.PositiveIntegerField()
    bucket_start = models.DateTimeField()
    marked_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline_id", "resolution", "bucket_start"], name="dirtybucket_unique"
            )
        ]

    def __str__(self) -> str:
        return f"dirty p{self.pipeline_id} {self.resolution}s@{self.bucket_start}"
