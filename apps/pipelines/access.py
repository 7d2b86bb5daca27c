"""Access helpers for pipelines, their stages and rules: the only way views reach them.

A team the user is not in, or an object of another team, is a 404; a viewer's
write is a 403 (``apps.teams.access``). The ``*_for_request`` forms serve the REST
API, whose team comes from the request (``apps.teams.request_team``).
"""

from django.contrib.auth.models import AnonymousUser, User
from django.shortcuts import get_object_or_404
from rest_framework.request import Request

from apps.pipelines.models import NoStageRule, Pipeline, SpanRule, Stage
from apps.teams.access import membership_for_user, membership_for_writer
from apps.teams.models import Membership
from apps.teams.request_team import team_slug_for_request


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


def no_stage_rule_for_pipeline(*, pipeline: Pipeline, rule_id: int) -> NoStageRule:
    return get_object_or_404(NoStageRule, pipeline=pipeline, pk=rule_id)


def pipeline_for_request(request: Request, pipeline_slug: str, *, write: bool = False) -> Pipeline:
    """The API's pipeline: in the request's team, for a member (a writer if ``write``)."""
    _, pipeline = pipeline_for_user(
        user=request.user,
        team_slug=team_slug_for_request(request),
        pipeline_slug=pipeline_slug,
        write=write,
    )
    return pipeline


def stage_for_request(
    request: Request, pipeline_slug: str, stage_slug: str, *, write: bool = False
) -> Stage:
    pipeline = pipeline_for_request(request, pipeline_slug, write=write)
    return get_object_or_404(
        Stage.objects.select_related("pipeline"), pipeline=pipeline, slug=stage_slug
    )


def span_rule_for_request(
    request: Request, pipeline_slug: str, stage_slug: str, rule_id: int, *, write: bool = False
) -> SpanRule:
    stage = stage_for_request(request, pipeline_slug, stage_slug, write=write)
    return span_rule_for_stage(stage=stage, rule_id=rule_id)


def no_stage_rule_for_request(
    request: Request, pipeline_slug: str, rule_id: int, *, write: bool = False
) -> NoStageRule:
    pipeline = pipeline_for_request(request, pipeline_slug, write=write)
    return no_stage_rule_for_pipeline(pipeline=pipeline, rule_id=rule_id)
