from functools import partial

from celery import shared_task
from django.db import transaction

from apps.alerts.services.delivery import notification_deliver, notifications_due
from apps.alerts.services.evaluation import alerts_evaluate
from apps.alerts.services.recipients import recipient_confirmations_send


def alerts_evaluate_schedule(*, pipeline_ids: list[int], **_signal: object) -> None:
    """Have the rules of these pipelines look at their changed violations now."""
    transaction.on_commit(partial(evaluate_pipeline_alerts.delay, sorted(set(pipeline_ids))))


# Scheduled every 10 s, after the budgets' tick: durations, reminders, no data and burn
# rates move on time even when no violation changes. A beat still queued 10 s later
# expires unrun: the next one does the same work.
@shared_task(name="apps.alerts.tasks.evaluate_alerts", ignore_result=True, expires=10)
def evaluate_alerts() -> None:
    alerts_evaluate()


@shared_task(name="apps.alerts.tasks.evaluate_pipeline_alerts", ignore_result=True, expires=30)
def evaluate_pipeline_alerts(pipeline_ids: list[int]) -> None:
    alerts_evaluate(pipeline_ids=pipeline_ids)


# One task per notification, so that a slow or failing receiver holds up only its own.
# No Celery retry: the next attempt's time is in the row, the task is enqueued for it,
# and the sweep below sends whatever a lost task left due.
@shared_task(name="apps.alerts.tasks.deliver_notification", ignore_result=True)
def deliver_notification(notification_id: int) -> None:
    result = notification_deliver(notification_id=notification_id)
    if result.retry_in_s is not None:
        deliver_notification.apply_async((notification_id,), countdown=result.retry_in_s)


# Only what has been due for a while: a notification just written or just due has its
# own task in the queue, and enqueuing it again each sweep would flood a busy queue.
SWEEP_GRACE_S = 30


@shared_task(name="apps.alerts.tasks.deliver_due_notifications", ignore_result=True, expires=5)
def deliver_due_notifications() -> None:
    for notification_id in notifications_due(grace_s=SWEEP_GRACE_S):
        deliver_notification.delay(notification_id)


# Enqueued when a channel's change that asks addresses to confirm is committed.
@shared_task(name="apps.alerts.tasks.send_confirmations", ignore_result=True)
def send_confirmations(channel_id: int) -> None:
    recipient_confirmations_send(channel_id=channel_id)


# Safety net and retries: confirmations a lost task left, or whose send failed, once due
# for a while (a fresh one has its own task in the queue).
@shared_task(name="apps.alerts.tasks.send_due_confirmations", ignore_result=True, expires=30)
def send_due_confirmations() -> None:
    recipient_confirmations_send(grace_s=SWEEP_GRACE_S)
