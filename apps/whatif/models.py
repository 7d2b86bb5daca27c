"""What-if runs (a replay or a lever search, computed by a worker) and saved scenarios."""

from django.contrib.auth.models import User
from django.db import models
from django.utils import timezone

from apps.core.models import TimeStampedModel
from apps.pipelines.models import Pipeline
from apps.teams.models import Team


class RunKind(models.TextChoices):
    REPLAY = "replay", "replay under changes"
    LEVERS = "levers", "lever search"


class RunStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


IN_FLIGHT = (RunStatus.PENDING, RunStatus.RUNNING)


class WhatIfRun(models.Model):
    """One computation asked for, by what determines its answer (``key``).

    The same question again (same window, traces, changes and pipeline configuration)
    finds this row and its result instead of replaying again. A worker claims the row
    by a conditional update; a run whose worker died is claimed again once it is
    stale, and failed after ``WHATIF_MAX_ATTEMPTS``.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="whatif_runs")
    kind = models.CharField(max_length=10, choices=RunKind.choices)
    key = models.CharField(max_length=64, help_text="SHA-256 of what determines the answer.")
    params = models.JSONField(help_text="Window, traces, percentile and changes, as asked.")
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pipeline", "key"], name="whatifrun_unique_key")
        ]
        indexes = [
            models.Index(
                fields=["team", "created_at"],
                name="whatifrun_in_flight",
                condition=models.Q(status__in=IN_FLIGHT),
            ),
            models.Index(fields=["created_at"], name="whatifrun_created"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} of {self.pipeline_id}: {self.status}"

    @property
    def is_finished(self) -> bool:
        return self.status in (RunStatus.DONE, RunStatus.FAILED)


class SavedScenario(TimeStampedModel):
    """A named set of changes to a pipeline, to run again on newer traffic or share."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="scenarios")
    name = models.CharField(max_length=100)
    changes = models.JSONField(help_text="The changes in the API's form.")
    created_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pipeline", "name"], name="savedscenario_unique_name")
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
