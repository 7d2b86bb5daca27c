from django.db.models import Prefetch, QuerySet

from apps.alerts.models import AlertRule, Channel
from apps.pipelines.models import Pipeline, Stage
from apps.teams.models import Team


def channels_for_config(*, team: Team) -> QuerySet[Channel]:
    return Channel.objects.filter(team=team).order_by("slug")


def alert_rules_for_config(*, team: Team) -> QuerySet[AlertRule]:
    """The team's rules with what the file names them by: pipeline, stage and channel slugs."""
    return (
        AlertRule.objects.filter(team=team)
        .select_related("pipeline", "stage")
        .prefetch_related(Prefetch("channels", queryset=Channel.objects.order_by("slug")))
        .order_by("slug")
    )


def pipeline_outlines_for_config(*, team: Team) -> dict[str, tuple[set[str], bool]]:
    """Each pipeline's slug: its stage slugs and whether it has an objective."""
    outlines: dict[str, tuple[set[str], bool]] = {
        slug: (set(), target is not None)
        for slug, target in Pipeline.objects.filter(team=team).values_list(
            "slug", "objective_target"
        )
    }
    for pipeline_slug, stage_slug in Stage.objects.filter(pipeline__team=team).values_list(
        "pipeline__slug", "slug"
    ):
        outlines[pipeline_slug][0].add(stage_slug)
    return outlines
