from django.contrib.postgres.fields import ArrayField
from django.db import models


class TimeStampedModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class WorkerHeartbeat(models.Model):
    """Last time a worker ran the scheduled heartbeat; shows the queue is being consumed."""

    hostname = models.CharField(max_length=255, unique=True)
    beat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hostname} @ {self.beat_at:%Y-%m-%d %H:%M:%S}"


class QuarantineKind(models.TextChoices):
    RAW_BATCH = "raw_batch", "raw batch"
    TRACE = "trace", "trace"
    ROLLUP_BUCKET = "rollup_bucket", "rollup bucket"
    EVALUATION = "evaluation", "budget evaluation"


class PassKind(models.TextChoices):
    """The passes whose claims and strikes ``crash_guard`` keeps: one per quarantine kind,
    and recomputes, whose traces are held as traces when set aside."""

    RAW_BATCH = QuarantineKind.RAW_BATCH.value, QuarantineKind.RAW_BATCH.label
    TRACE = QuarantineKind.TRACE.value, QuarantineKind.TRACE.label
    ROLLUP_BUCKET = QuarantineKind.ROLLUP_BUCKET.value, QuarantineKind.ROLLUP_BUCKET.label
    EVALUATION = QuarantineKind.EVALUATION.value, QuarantineKind.EVALUATION.label
    RECOMPUTE = "recompute", "trace recompute"


class QuarantinedItem(models.Model):
    """An item a shared pass set aside (see ``apps.core.quarantine``).

    ``item_id`` is the raw batch, trace, dirty bucket or pipeline id, by ``kind``.
    Plain ids rather than foreign keys: this app sits below the ones that own the items.
    """

    kind = models.CharField(max_length=20, choices=QuarantineKind.choices)
    item_id = models.BigIntegerField()
    team_id = models.BigIntegerField(null=True, blank=True)
    reason = models.TextField()
    times = models.PositiveIntegerField(default=1, help_text="How often it was quarantined.")
    first_quarantined_at = models.DateTimeField()
    last_quarantined_at = models.DateTimeField()
    released_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was put back into its pass; empty while held."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "item_id"], name="quarantine_unique_item")
        ]
        indexes = [
            models.Index(
                fields=["kind"],
                name="quarantine_held_by_kind",
                condition=models.Q(released_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.item_id}"


class PassClaim(models.Model):
    """The items a shared pass is working on, written before it starts (see ``crash_guard``).

    Deleted in the pass's own transaction, so it outlives only a pass that never
    finished: its database session (``backend_pid`` started at ``backend_start``) is
    then gone.
    """

    kind = models.CharField(max_length=20, choices=PassKind.choices)
    item_ids = ArrayField(models.BigIntegerField())
    backend_pid = models.IntegerField()
    backend_start = models.DateTimeField(null=True)
    claimed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.kind} pass by backend {self.backend_pid}"


class CrashStrike(models.Model):
    """How often a pass holding this item died without finishing."""

    kind = models.CharField(max_length=20, choices=PassKind.choices)
    item_id = models.BigIntegerField()
    strikes = models.PositiveSmallIntegerField(default=1)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "item_id"], name="crash_strike_unique_item")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.item_id}: {self.strikes}"
