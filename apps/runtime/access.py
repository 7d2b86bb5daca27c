"""A runtime document's pipeline, for a metrics token: its team's pipeline, else 404."""

from django.shortcuts import get_object_or_404

from apps.pipelines.models import Pipeline
from apps.teams.models import MetricsToken


def pipeline_for_token(*, token: MetricsToken, pipeline_slug: str) -> Pipeline:
    return get_object_or_404(Pipeline, team_id=token.team_id, slug=pipeline_slug)
