"""Reads over violations, always within one team."""

from django.db.models import QuerySet

from apps.rollups.models import Violation
from apps.teams.models import Team

E2E = "e2e"
OPEN = "open"
CLOSED = "closed"


def violations_for_team(
    *,
    team: Team,
    pipeline_slug: str = "",
    stage_slug: str = "",
    state: str = "",
) -> QuerySet[Violation]:
    """The team's violations, newest first; ``stage_slug`` "e2e" keeps the end-to-end ones."""
    violations = Violation.objects.filter(team=team).select_related("pipeline", "stage")
    if pipeline_slug:
        violations = violations.filter(pipeline__slug=pipeline_slug)
    if stage_slug == E2E:
        violations = violations.filter(stage__isnull=True)
    elif stage_slug:
        violations = violations.filter(stage__slug=stage_slug)
    if state == OPEN:
        violations = violations.filter(closed_at__isnull=True)
    elif state == CLOSED:
        violations = violations.filter(closed_at__isnull=False)
    return violations.order_by("-opened_at", "-id")
