from django.utils import timezone

from apps.core.models import WorkerHeartbeat


def worker_heartbeat_record(*, hostname: str) -> WorkerHeartbeat:
    heartbeat, _ = WorkerHeartbeat.objects.update_or_create(
        hostname=hostname, defaults={"beat_at": timezone.now()}
    )
    return heartbeat
