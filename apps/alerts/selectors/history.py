"""Reads for the alert pages and API: channels with their last result, rules, incidents."""

from django.db.models import Prefetch, QuerySet

from apps.alerts.models import (
    AlertRule,
    AlertState,
    Channel,
    DeliveryAttempt,
    Incident,
    Notification,
)
from apps.teams.models import Team


def channels_for_team(*, team: Team) -> QuerySet[Channel]:
    return Channel.objects.filter(team=team).order_by("slug")


def channel_last_notification(*, channel: Channel) -> Notification | None:
    """The channel's latest notification with its attempts: its last delivery result."""
    return (
        Notification.objects.filter(channel=channel)
        .prefetch_related("delivery_attempts")
        .order_by("-created_at", "-id")
        .first()
    )


def rules_for_team(*, team: Team) -> QuerySet[AlertRule]:
    return (
        AlertRule.objects.filter(team=team)
        .select_related("pipeline", "stage")
        .prefetch_related(
            "channels", Prefetch("states", queryset=AlertState.objects.order_by("scope_key"))
        )
        .order_by("slug")
    )


def incidents_for_team(
    *, team: Team, status: str | None = None, pipeline_slug: str | None = None
) -> QuerySet[Incident]:
    """Newest first; ``status`` "firing" (open) or "resolved"."""
    incidents = Incident.objects.filter(team=team).select_related("pipeline", "stage", "rule")
    if status == "firing":
        incidents = incidents.filter(resolved_at__isnull=True)
    elif status == "resolved":
        incidents = incidents.filter(resolved_at__isnull=False)
    if pipeline_slug:
        incidents = incidents.filter(pipeline__slug=pipeline_slug)
    return incidents.order_by("-started_at", "-id")


def incident_notifications(*, incident: Incident) -> list[Notification]:
    """The incident's notifications, oldest first, each with its attempts in order."""
    return list(
        Notification.objects.filter(incident=incident)
        .select_related("channel")
        .prefetch_related(
            Prefetch("delivery_attempts", queryset=DeliveryAttempt.objects.order_by("number"))
        )
        .order_by("created_at", "id")
    )
