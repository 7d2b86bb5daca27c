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
