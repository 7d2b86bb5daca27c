"""What analysis writes: per-trace stage samples, and the buckets they made dirty.

Stage samples are partitioned by day of trace start, like spans; a trace analyzed
again (new spans) replaces its samples, keyed by (trace_pk, stage_id, start_ns).
Dirty buckets are the outbox the rollups read: written in the same transaction as
the samples.
"""

from django.db import models


class StageSample(models.Model):
    """One analyzed trace's time in one stage of its pipeline."""

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
        db_table = "rollups_stagesample"  # created by the rollups app; kept on moving here
        indexes = [
            models.Index(fields=["pipeline_id", "start_ns"], name="stagesample_pipeline_start"),
        ]

    def __str__(self) -> str:
        return f"trace {self.trace_pk} stage {self.stage_id}: {self.wall_ns} ns"


class DirtyBucket(models.Model):
    """A pipeline's bucket whose samples changed and whose rollups must be recomputed.

    The outbox between analysis and rollups.

    Written in the same transaction as the samples; the rollup job deletes the row
    in the transaction that rewrites the bucket, so a crash leaves it to redo. A
    bucket whose rewrite failed keeps its row with ``quarantined_at`` set: later
    passes skip it (new samples only touch ``marked_at``) until it is released.
    """

    pipeline_id = models.BigIntegerField()
    resolution = models.PositiveIntegerField()
    bucket_start = models.DateTimeField()
    marked_at = models.DateTimeField(auto_now=True)
    quarantined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "rollups_dirtybucket"  # created by the rollups app; kept on moving here
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline_id", "resolution", "bucket_start"], name="dirtybucket_unique"
            )
        ]

    def __str__(self) -> str:
        return f"dirty p{self.pipeline_id} {self.resolution}s@{self.bucket_start}"
