"""The stage editor's form for a stage's degrade policy: the run-time client's levers."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.views.decorators.http import require_http_methods

from apps.core.htmx import HtmxHttpRequest
from apps.pipelines.access import pipeline_for_user, stage_for_pipeline
from apps.pipelines.degrade_forms import DegradeForm
from apps.pipelines.services import stage_update
from apps.pipelines.views import editor_changed, editor_form


@login_required
@require_http_methods(["GET", "POST"])
def stage_degrade_edit(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, stage_id: int
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    stage = stage_for_pipeline(pipeline=pipeline, stage_id=stage_id)
    form = DegradeForm(initial=DegradeForm.initial_for(stage.degrade))
    if request.method == "POST":
        form = DegradeForm(request.POST)
        if form.is_valid():
            try:
                stage_update(stage=stage, degrade=form.policy())
            except ValidationError as exc:
                form.add_policy_error(exc)
            else:
                return editor_changed(request, membership, pipeline)
    context = {
        "pipeline": pipeline,
        "stage": stage,
        "form": form,
        "refresh_s": settings.RUNTIME_REFRESH_SECONDS,
    }
    return editor_form(request, membership, "degrade_form", context)
