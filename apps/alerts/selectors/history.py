"""Reads for the alert pages and API: channels with their last result, rules, incidents."""

from django.db.models import Count, Prefetch, Q, QuerySet

from apps.alerts.models import (
    AlertRule,
    AlertState,
    Channel,
    DeliveryAttempt,
    Incident,
    Notification,
    NotificationStatus,
)
from apps.teams.models import Team

# The history's filter: incidents still firing, or those resolved.
INCIDENT_STATUSES = ("firing", "resolved")


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


def _count(status: str) -> Count:
    return Count("notifications", filter=Q(notifications__status=status))


def with_delivery_counts(incidents: QuerySet[Incident]) -> QuerySet[Incident]:
    """Each incident with its notifications counted, in all and by state."""
    return incidents.annotate(
        notification_count=Count("notifications"),
        delivered_count=_count(NotificationStatus.DELIVERED),
        pending_count=_count(NotificationStatus.PENDING),
        failed_count=_count(NotificationStatus.FAILED),
        cancelled_count=_count(NotificationStatus.CANCELLED),
    )
