"""Rollup buckets of stage samples, budget evaluations and violations."""

from django.db import models


class Measure(models.IntegerChoices):
    WALL = 1, "wall"
    CRITICAL = 2, "critical"
    # A streamed answer's (LlmBucket only): ns per output token after the first; output
    # tokens a second, stored times NS_PER_MS so that the sketch holds tokens a second;
    # the longest gap between two chunks, ns.
    TIME_PER_OUTPUT_TOKEN = 3, "time per output token"
    OUTPUT_TOKENS_PER_S = 4, "output tokens per second"
    MAX_CHUNK_GAP = 5, "longest chunk gap"


TIME_MEASURES = (Measure.WALL, Measure.CRITICAL)
TIME_MEASURE_LABELS = [measure.label for measure in TIME_MEASURES]
STREAM_MEASURES = (
    Measure.TIME_PER_OUTPUT_TOKEN,
    Measure.OUTPUT_TOKENS_PER_S,
    Measure.MAX_CHUNK_GAP,
)
# LlmBucket's model_id for the figures of every model together.
ALL_MODELS = 0


# Pseudo stage ids in rollups: the whole trace, and critical-path time in no stage.
E2E_STAGE_ID = 0
UNTRACKED_STAGE_ID = -1


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


class LlmBucket(models.Model):
    """What stage samples say of their LLM calls, rolled up like RollupBucket: the
    streaming measures of each stage for every model together (``model_id`` ALL_MODELS),
    and every measure (wall, critical, streaming) of each stage per ServedModel.

    Kept apart from RollupBucket, whose readers sum every row of a stage: rows per model
    there would count each sample twice.
    """

    team_id = models.BigIntegerField()
    pipeline_id = models.BigIntegerField()
    stage_id = models.BigIntegerField()
    model_id = models.BigIntegerField()
    measure = models.PositiveSmallIntegerField(choices=Measure.choices)
    resolution = models.PositiveIntegerField(help_text="Bucket width in seconds.")
    bucket_start = models.DateTimeField()
    count = models.PositiveIntegerField()
    error_count = models.PositiveIntegerField(default=0)
    sum_ns = models.BigIntegerField()
    max_ns = models.BigIntegerField()
    sketch = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "pipeline_id", "stage_id", "model_id", "measure", "resolution", "bucket_start"
                ],
                name="llmbucket_unique_key",
            )
        ]  # fmt: skip
        indexes = [
            models.Index(
                fields=["pipeline_id", "resolution", "bucket_start"], name="llmbucket_pipeline_time"
            )
        ]

    def __str__(self) -> str:
        where = f"p{self.pipeline_id}/s{self.stage_id}/m{self.model_id}"
        return f"{where}/{self.resolution}s@{self.bucket_start}"


class BudgetEvaluation(models.Model):
    """The last evaluation tick of a pipeline's budgets: the claim that makes a pass idempotent.

    An evaluation moves ``evaluated_at`` forward with a conditional update and writes
    violations in the same transaction; a second run of the same tick updates no row
    and leaves, so hysteresis counters never advance twice for one tick.
    """

    pipeline = models.OneToOneField(
        "pipelines.Pipeline", on_delete=models.CASCADE, related_name="+", primary_key=True
    )
    evaluated_at = models.DateTimeField()
    # Set when an evaluation of this pipeline failed: no pass evaluates it until released.
    quarantined_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"p{self.pipeline_id} evaluated at {self.evaluated_at}"


class Violation(models.Model):
    """A pipeline (``stage`` null) or stage percentile over its budget in the evaluation window.

    Opens when an evaluation finds the percentile over budget, follows the latest
    and the peak value while open, and closes after ``close_after`` consecutive
    evaluations back under budget. Percentiles are ``p50``..``p99`` as on budgets.
    """

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    pipeline = models.ForeignKey(
        "pipelines.Pipeline", on_delete=models.CASCADE, related_name="violations"
    )
    stage = models.ForeignKey(
        "pipelines.Stage",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="violations",
        help_text="Null for the end-to-end time.",
    )
    percentile = models.CharField(max_length=3)
    measure = models.PositiveSmallIntegerField(
        choices=Measure.choices,
        default=Measure.WALL,
        db_default=Measure.WALL,
        help_text="Wall time, or a streaming measure of a stage's stream budget.",
    )
    budget_ms = models.PositiveIntegerField()
    window_s = models.PositiveIntegerField()
    observed_ms = models.FloatField(help_text="The percentile at the latest evaluation.")
    peak_ms = models.FloatField()
    sample_count = models.PositiveIntegerField(help_text="Samples in the latest window.")
    opened_at = models.DateTimeField()
    last_evaluated_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    consecutive_ok = models.PositiveSmallIntegerField(default=0)
    example_trace_ids = models.JSONField(
        default=list, blank=True, help_text="The slowest traces of the window, hex, slowest first."
    )

    class Meta:
        constraints = [
            # Two partial constraints because NULL stages never collide in a unique index.
            models.UniqueConstraint(
                fields=["pipeline", "stage", "measure", "percentile"],
                condition=models.Q(closed_at__isnull=True, stage__isnull=False),
                name="violation_one_open_per_stage_measure",
            ),
            models.UniqueConstraint(
                fields=["pipeline", "percentile"],
                condition=models.Q(closed_at__isnull=True, stage__isnull=True),
                name="violation_one_open_end_to_end",
            ),
        ]
        indexes = [
            models.Index(fields=["team", "-opened_at"], name="violation_team_opened"),
            models.Index(
                fields=["pipeline"],
                name="violation_open_by_pipeline",
                condition=models.Q(closed_at__isnull=True),
            ),
        ]
        ordering = ["-opened_at", "-id"]

    def __str__(self) -> str:
        scope = f"stage {self.stage_id}" if self.stage_id else "end to end"
        measure = "" if self.measure == Measure.WALL else f" {self.get_measure_display()}"
        return f"p{self.pipeline_id} {scope}{measure} {self.percentile} > {self.budget_ms} ms"

    @property
    def is_open(self) -> bool:
        return self.closed_at is None

    @property
    def measure_words(self) -> str:
        """ "" for the stage's own (wall) time, else "longest chunk gap" and the like."""
        return "" if self.measure == Measure.WALL else self.get_measure_display()
