from django.shortcuts import get_object_or_404

from apps.rollups.models import Violation
from apps.teams.models import Team


def violation_for_team(*, team: Team, violation_id: int) -> Violation:
    """A violation of the team, or 404: another team's violation does not exist here."""
    return get_object_or_404(
        Violation.objects.select_related("pipeline", "stage"), team=team, pk=violation_id
    )
