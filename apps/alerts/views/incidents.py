"""The alert history: incidents, firing first, and one incident with its deliveries."""

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from apps.alerts.access import incident_for_user
from apps.alerts.formats import text
from apps.alerts.labels import incident_scope_words
from apps.alerts.models import Incident
from apps.alerts.selectors.history import (
    INCIDENT_STATUSES,
    channels_for_team,
    incident_notifications,
    incidents_for_team,
    rules_for_team,
    with_delivery_counts,
)
from apps.alerts.services.payloads import incident_summary
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.pipelines.selectors import pipelines_for_team
from apps.teams.access import membership_for_user
from apps.teams.current_team import current_team_remember

INCIDENTS = "alerts/incidents.html"
INCIDENT = "alerts/incident.html"
PAGE_SIZE = 50


@dataclass(frozen=True)
class IncidentRow:
    incident: Incident
    scope: str


def _firing_first(incidents: QuerySet[Incident]) -> QuerySet[Incident]:
    return incidents.annotate(
        resolved_rank=Case(
            When(resolved_at__isnull=True, then=Value(0)),
            default=Value(1),
            output_field=IntegerField(),
        )
    ).order_by("resolved_rank", "-started_at", "-id")


@login_required
@require_GET
def incident_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    current_team_remember(request, membership.team)
    status = request.GET.get("status", "")
    status = status if status in INCIDENT_STATUSES else ""
    pipeline_slug = request.GET.get("pipeline", "")[:50]
    incidents = incidents_for_team(
        team=membership.team, status=status or None, pipeline_slug=pipeline_slug or None
    )
    page = Paginator(_firing_first(with_delivery_counts(incidents)), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    filters = request.GET.copy()
    filters.pop("page", None)
    context = {
        "team": membership.team,
        "can_write": membership.can_write,
        "page": page,
        "rows": [IncidentRow(i, incident_scope_words(i)) for i in page],
        "pipelines": list(pipelines_for_team(team=membership.team)),
        "status": status,
        "pipeline_slug": pipeline_slug,
        "filter_query": filters.urlencode(),
        "filtered": bool(status or pipeline_slug),
        "has_rules": rules_for_team(team=membership.team).exists(),
        "has_channels": channels_for_team(team=membership.team).exists(),
        "now": timezone.now(),
    }
    return render_page(request, INCIDENTS, context, partial="results")


@login_required
@require_GET
def incident_detail(request: HtmxHttpRequest, team_slug: str, incident_id: int) -> HttpResponse:
    membership, incident = incident_for_user(
        user=request.user, team_slug=team_slug, incident_id=incident_id
    )
    current_team_remember(request, membership.team)
    facts = incident.facts
    observed, budget = facts.get("observed_ms"), facts.get("budget_ms")
    context = {
        "team": membership.team,
        "incident": incident,
        "scope_words": incident_scope_words(incident),
        "summary": incident_summary(incident=incident),
        "over_now": observed is not None and budget is not None and observed > budget,
        "facts": facts,
        "decisions": text.ranked((facts.get("degradation") or {}).get("by_action") or {}),
        "degraded_stages": text.ranked((facts.get("degradation") or {}).get("by_stage") or {}),
        "notifications": incident_notifications(incident=incident),
        "now": timezone.now(),
    }
    return render_page(request, INCIDENT, context)
