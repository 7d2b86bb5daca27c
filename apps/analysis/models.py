"""What analysis writes: per-trace stage samples, and the buckets they made dirty.

Stage samples are partitioned by day of trace start, like spans; a trace analyzed
again (new spans) replaces its samples, keyed by (trace_pk, stage_id, start_ns).
Dirty buckets are the outbox the rollups read: written in the same transaction as
the samples.
"""

from django.db import models
from django.db.models.functions import Now
from django.utils import timezone


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
    holdout = models.BooleanField(
        default=False,
        db_default=False,
        help_text="The request ran without the run-time client's levers (docs/runtime.md).",
    )
    # What the stage's LLM calls say (apps.analysis.llm_figures); null where they say nothing.
    model_id = models.BigIntegerField(
        null=True, blank=True, help_text="The ServedModel that answered in this stage."
    )
    output_tokens = models.IntegerField(null=True, blank=True)
    generation_ns = models.BigIntegerField(
        null=True, blank=True, help_text="The streamed answer's time after its first token."
    )
    max_gap_ns = models.BigIntegerField(
        null=True, blank=True, help_text="The longest gap between two chunks of the answer."
    )

    class Meta:
        indexes = [
            models.Index(fields=["pipeline_id", "start_ns"], name="stagesample_pipeline_start"),
            # The holdout is a few percent of the samples: its own small index, so the
            # runtime document reads an hour of them without the rest.
            models.Index(
                fields=["pipeline_id", "start_ns"],
                name="stagesample_holdout",
                condition=models.Q(holdout=True),
            ),
        ]

    def __str__(self) -> str:
        return f"trace {self.trace_pk} stage {self.stage_id}: {self.wall_ns} ns"


class ServedModel(models.Model):
    """A model as a team's spans name it, with its provider: stage samples and the per-model
    rollups refer to it by id. A team has at most ``MAX_MODELS_PER_TEAM``; the names past
    that count as one row named ``OTHER_MODEL``, so a team sending a new name per request
    cannot grow the table or the pages without bound."""

    team_id = models.BigIntegerField()
    provider = models.CharField(max_length=100, blank=True)
    model = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team_id", "provider", "model"], name="servedmodel_unique_name"
            )
        ]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}" if self.provider else self.model

    @property
    def label(self) -> str:
        return f"{self.model} ({self.provider})" if self.provider else self.model


MAX_MODELS_PER_TEAM = 200
OTHER_MODEL = "(other models)"


class DirtyBucket(models.Model):
    """A pipeline's bucket whose samples changed and whose rollups must be recomputed.

    The outbox between analysis and rollups.

    Written in the same transaction as the samples; the rollup job deletes the row
    in the transaction that rewrites the bucket, so a crash leaves it to redo. A
    bucket whose rewrite failed keeps its row with ``quarantined_at`` set: later
    passes skip it (new samples only touch ``marked_at``) until it is released.

    ``dirty_since`` is when the row was made and stays as it is while marks touch it: the
    worker's passes leave a finest bucket until it has been dirty for
    ``ROLLUP_SETTLE_SECONDS``, so a bucket whose traces are analyzed one pass after another
    is rewritten once per that period, not once per pass.
    """

    pipeline_id = models.BigIntegerField()
    resolution = models.PositiveIntegerField()
    bucket_start = models.DateTimeField()
    marked_at = models.DateTimeField(auto_now=True)
    dirty_since = models.DateTimeField(default=timezone.now, db_default=Now())
    quarantined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline_id", "resolution", "bucket_start"], name="dirtybucket_unique"
            )
        ]

    def __str__(self) -> str:
        return f"dirty p{self.pipeline_id} {self.resolution}s@{self.bucket_start}"


class RecomputeStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"
    FAILED = "failed", "failed"


RECOMPUTE_IN_FLIGHT = (RecomputeStatus.QUEUED, RecomputeStatus.RUNNING)


class Recompute(models.Model):
    """A pipeline's traces of the last ``hours`` analysed again with the rules of now.

    Asked for by a writer after changing the rules; worked through by a worker in
    batches, in the order of (trace start, trace id). Each batch commits the traces'
    new samples, their dirty rollup buckets, the counts below and the position reached
    (``cursor_*``) together, so a worker that dies mid-batch leaves the last batch to
    redo: nothing is counted twice. One per account is queued or running at a time.
    """

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    pipeline = models.ForeignKey(
        "pipelines.Pipeline", on_delete=models.CASCADE, related_name="recomputes"
    )
    requested_by = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    hours = models.PositiveSmallIntegerField(help_text="How far back, as asked.")
    # Trace starts in [window_start, window_end): the start is later than asked when
    # the spans of the hours asked for are no longer stored.
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    status = models.CharField(
        max_length=10, choices=RecomputeStatus.choices, default=RecomputeStatus.QUEUED
    )
    total = models.PositiveIntegerField(default=0, help_text="Traces in the window at the start.")
    done = models.PositiveIntegerField(default=0, help_text="Traces analysed again.")
    skipped = models.PositiveIntegerField(
        default=0, help_text="Traces that got new spans meanwhile: finalization analyses them."
    )
    expired = models.PositiveIntegerField(
        default=0, help_text="Traces left as they were: their spans are no longer stored."
    )
    failed = models.PositiveIntegerField(default=0, help_text="Traces set aside (quarantined).")
    cursor_start_ns = models.BigIntegerField(null=True, blank=True)
    cursor_trace_pk = models.BigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Last batch committed (or start): a run in flight without progress for a while is
    # handed to a worker again.
    progressed_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(
                fields=["team"],
                name="recompute_in_flight",
                condition=models.Q(status__in=RECOMPUTE_IN_FLIGHT),
            ),
            models.Index(fields=["pipeline", "-created_at"], name="recompute_pipeline_latest"),
        ]

    def __str__(self) -> str:
        return f"recompute {self.pk} of p{self.pipeline_id}: {self.status}"

    @property
    def in_flight(self) -> bool:
        return self.status in RECOMPUTE_IN_FLIGHT

    @property
    def handled(self) -> int:
        return self.done + self.skipped + self.expired + self.failed


class DegradationAction(models.IntegerChoices):
    """What a client did to keep a request within its deadline (``docs/runtime.md``)."""

    SKIP = 1, "skip"
    FALLBACK = 2, "fallback"
    HEDGE = 3, "hedge"
    CAP = 4, "cap"
    TIMEOUT = 5, "timeout"


class DegradationWinner(models.IntegerChoices):
    """Which attempt of a fallback or a hedge answered."""

    NONE = 0, "—"
    PRIMARY = 1, "primary"
    FALLBACK = 2, "fallback"
    FIRST = 3, "first"
    SECOND = 4, "second"


class Degradation(models.Model):
    """One decision a client recorded on a trace of a pipeline: the degradation ledger.

    Written by trace analysis beside the stage samples, from the spans' events named
    ``latency_budget.decision``, and replaced with them; partitioned by day of trace start
    like them. ``seq`` orders a trace's decisions by event time. ``rescued`` is the
    trace's: it met the pipeline's deadline, and would not have without the time the
    client estimates its decisions saved.
    """

    pk = models.CompositePrimaryKey("trace_pk", "seq", "start_ns")
    trace_pk = models.BigIntegerField()
    seq = models.PositiveSmallIntegerField()
    start_ns = models.BigIntegerField(help_text="Start of the trace's root span.")
    team_id = models.BigIntegerField()
    pipeline_id = models.BigIntegerField()
    stage_id = models.BigIntegerField()
    action = models.PositiveSmallIntegerField(choices=DegradationAction.choices)
    winner = models.PositiveSmallIntegerField(
        choices=DegradationWinner.choices, default=DegradationWinner.NONE
    )
    saved_ns = models.BigIntegerField(help_text="The client's estimate of the time saved.")
    e2e_ns = models.BigIntegerField(help_text="The trace's end-to-end time.")
    rescued = models.BooleanField(default=False)

    class Meta:
        indexes = [
            models.Index(fields=["pipeline_id", "start_ns"], name="degradation_pipeline_start"),
        ]

    def __str__(self) -> str:
        return f"trace {self.trace_pk} stage {self.stage_id}: {self.get_action_display()}"
