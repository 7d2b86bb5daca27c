"""The pipeline editor's no-stage rules: spans that belong to no stage on purpose."""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.views.decorators.http import require_http_methods, require_POST

from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest
from apps.pipelines.access import no_stage_rule_for_pipeline, pipeline_for_user
from apps.pipelines.forms import NoStageRuleForm
from apps.pipelines.models import Pipeline
from apps.pipelines.services import (
    no_stage_rule_create,
    no_stage_rule_delete,
    no_stage_rule_update,
)
from apps.pipelines.views import editor_changed, editor_form


def _no_stage_context(pipeline: Pipeline, **extra: Any) -> dict[str, Any]:
    return {"pipeline": pipeline, "rule": None, **extra}


@login_required
@require_http_methods(["GET", "POST"])
def no_stage_rule_add(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    form = NoStageRuleForm(request.POST) if request.method == "POST" else NoStageRuleForm()
    if form.is_bound and form.is_valid():
        try:
            no_stage_rule_create(pipeline=pipeline, **form.cleaned_data)
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            return editor_changed(request, membership, pipeline)
    context = _no_stage_context(pipeline, form=form)
    return editor_form(request, membership, "no_stage_rule_form", context)


@login_required
@require_http_methods(["GET", "POST"])
def no_stage_rule_edit(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, rule_id: int
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    rule = no_stage_rule_for_pipeline(pipeline=pipeline, rule_id=rule_id)
    form = NoStageRuleForm(initial=NoStageRuleForm.initial_for(rule))
    if request.method == "POST":
        form = NoStageRuleForm(request.POST)
        if form.is_valid():
            try:
                no_stage_rule_update(rule=rule, **form.cleaned_data)
            except ValidationError as exc:
                add_service_error(form, exc)
            else:
                return editor_changed(request, membership, pipeline)
    context = _no_stage_context(pipeline, rule=rule, form=form)
    return editor_form(request, membership, "no_stage_rule_form", context)


@login_required
@require_POST
def no_stage_rule_delete_view(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, rule_id: int
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    no_stage_rule_delete(rule=no_stage_rule_for_pipeline(pipeline=pipeline, rule_id=rule_id))
    return editor_changed(request, membership, pipeline)
