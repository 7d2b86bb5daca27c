import socket

from celery import shared_task

from apps.core.services import worker_heartbeat_record


@shared_task(name="apps.core.tasks.record_heartbeat", ignore_result=True)
def record_heartbeat(hostname: str | None = None) -> None:
    # Run by the scheduler: proves beat → broker → worker → database end to end.
    worker_heartbeat_record(hostname=hostname or socket.gethostname())
