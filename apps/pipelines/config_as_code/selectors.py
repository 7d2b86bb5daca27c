from django.db.models import Prefetch, QuerySet

from apps.pipelines.models import Pipeline, SpanRule, Stage
from apps.teams.models import Team


def pipelines_for_config(*, team: Team) -> QuerySet[Pipeline]:
    """The team's pipelines with stages and rules in order, as config as code reads them."""
    return (
        Pipeline.objects.filter(team=team)
        .prefetch_related(
            Prefetch(
                "stages",
                queryset=Stage.objects.order_by("position", "id").prefetch_related(
                    Prefetch("rules", queryset=SpanRule.objects.order_by("position", "id"))
                ),
            )
        )
        .order_by("slug")
    )
