"""Access helpers for what-if runs and saved scenarios: outsiders get 404.

A run belongs to its pipeline's team; anyone in the team may read it (it holds the
same figures as the team's dashboards). Saving and deleting scenarios is for writers.
"""

from django.contrib.auth.models import AnonymousUser, User
from django.shortcuts import get_object_or_404

from apps.pipelines.models import Pipeline
from apps.teams.access import membership_for_user
from apps.whatif.models import SavedScenario, WhatIfRun


def whatif_run_for_user(
    *, user: User | AnonymousUser, team_slug: str, pipeline: Pipeline | None = None, run_id: int
) -> WhatIfRun:
    membership = membership_for_user(user=user, team_slug=team_slug)
    runs = WhatIfRun.objects.filter(team=membership.team).select_related("pipeline")
    if pipeline is not None:
        runs = runs.filter(pipeline=pipeline)
    return get_object_or_404(runs, pk=run_id)


def scenario_for_pipeline(*, pipeline: Pipeline, scenario_id: int) -> SavedScenario:
    return get_object_or_404(SavedScenario, pipeline=pipeline, pk=scenario_id)
