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
