from django.contrib.auth.models import AnonymousUser, User
from django.shortcuts import get_object_or_404

from apps.pipelines.models import Pipeline, SpanRule, Stage
from apps.teams.access import membership_for_user, membership_for_writer
from apps.teams.models import Membership


def pipeline_for_user(
    *,
    user: User | AnonymousUser,
    team_slug: str,
    pipeline_slug: str,
    write: bool = False,
) -> tuple[Membership, Pipeline]:
    lookup = membership_for_writer if write else membership_for_user
    membership = lookup(user=user, team_slug=team_slug)
    pipeline = get_object_or_404(Pipeline, team=membership.team, slug=pipeline_slug)
    return membership, pipeline


def stage_for_pipeline(*, pipeline: Pipeline, stage_id: int) -> Stage:
    return get_object_or_404(Stage, pipeline=pipeline, pk=stage_id)


def span_rule_for_stage(*, stage: Stage, rule_id: int) -> SpanRule:
    return get_object_or_404(SpanRule, stage=stage, pk=rule_id)
