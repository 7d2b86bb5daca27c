"""One team's deliveries never delay another's: a share in flight, a share of each sweep."""

from datetime import timedelta

from django.test import override_settings
from django.utils import timezone

from apps.alerts.models import Notification
from apps.alerts.services.delivery import notification_deliver, notifications_due
from apps.alerts.services.evaluation import alerts_evaluate
from tests.alerts.receivers import HttpReceiver, Reply
from tests.builders.alerts import NOW, rule, violation, webhook_channel
from tests.builders.configuration import make_pipeline
from tests.conftest import TeamWorld

LOOPBACK = override_settings(WEBHOOK_ALLOW_PRIVATE_IPS=True)


def _two_teams_fire(world: TeamWorld, url: str) -> tuple[list[Notification], Notification]:
    """The busy team fires to two channels, the other team to one."""
    busy = make_pipeline(world.team, "rag-chat", budget={"p95": 2500})
    quiet = make_pipeline(world.other_team, "search", budget={"p95": 800})
    rule(
        busy, [webhook_channel(world.team, "a", url=url), webhook_channel(world.team, "b", url=url)]
    )
    rule(quiet, [webhook_channel(world.other_team, "theirs", url=url)], slug="theirs")
    violation(busy, observed_ms=3100.0)
    violation(quiet, observed_ms=900.0)
    alerts_evaluate(now=NOW)
    mine = list(Notification.objects.filter(team=world.team).order_by("pk"))
    return mine, Notification.objects.get(team=world.other_team)


@LOOPBACK
def test_a_team_with_a_delivery_in_flight_waits_and_another_team_is_served(
    world: TeamWorld,
) -> None:
    receiver = HttpReceiver().start()
    receiver.script(*[Reply(204)] * 5)
    try:
        (slow, queued), theirs = _two_teams_fire(world, receiver.url())
        # The busy team's first delivery is still being sent (a receiver taking its time).
        Notification.objects.filter(pk=slow.pk).update(
            lease_until=timezone.now() + timedelta(minutes=1), attempts=1
        )

        deferred = notification_deliver(notification_id=queued.pk)
        attempts_while_deferred = Notification.objects.get(pk=queued.pk).attempts
        served = notification_deliver(notification_id=theirs.pk)
        Notification.objects.filter(pk=slow.pk).update(lease_until=None)
        later = notification_deliver(notification_id=queued.pk)
    finally:
        receiver.stop()

    assert deferred.outcome == "deferred"
    assert deferred.retry_in_s is not None
    assert 2 <= deferred.retry_in_s <= 4
    assert attempts_while_deferred == 0  # not claimed, not counted
    assert served.outcome == "success"
    assert later.outcome == "success"
    assert len(receiver.requests) == 2


def test_the_share_in_flight_is_a_setting(world: TeamWorld, settings) -> None:
    settings.ALERT_DELIVERIES_PER_TEAM = 0
    (slow, queued), _ = _two_teams_fire(world, "https://hooks.example.com/x")
    Notification.objects.filter(pk=slow.pk).update(
        lease_until=timezone.now() + timedelta(minutes=1)
    )

    result = notification_deliver(notification_id=queued.pk)

    assert result.outcome != "deferred"


def test_a_team_with_thousands_due_never_fills_the_sweep(world: TeamWorld) -> None:
    (template, _), theirs = _two_teams_fire(world, "https://hooks.example.com/x")
    old = NOW - timedelta(hours=1)
    Notification.objects.bulk_create(
        Notification(
            team_id=template.team_id,
            channel_id=template.channel_id,
            incident_id=template.incident_id,
            event=template.event,
            key=f"copy-{i}",
            message_id=f"copy-{i}",
            payload=template.payload,
            status=template.status,
            next_attempt_at=old,
            created_at=old,
        )
        for i in range(300)
    )
    Notification.objects.filter(pk=theirs.pk).update(next_attempt_at=NOW)

    due = notifications_due(now=NOW + timedelta(minutes=1), limit=50, per_team=20)

    assert theirs.pk in due
    assert len([pk for pk in due if pk != theirs.pk]) == 20
