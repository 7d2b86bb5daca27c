from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.pipelines.access import (
    pipeline_for_user,
    span_rule_for_stage,
    stage_for_pipeline,
)
from apps.pipelines.forms import (
    MoveForm,
    PipelineCreateForm,
    PipelineForm,
    PresetPreviewForm,
    SpanRuleForm,
    StageForm,
)
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.presets import PRESETS, pipeline_create_from_preset
from apps.pipelines.selectors import (
    Allocation,
    AllocationSegment,
    pipeline_allocation,
    pipeline_with_stages,
    pipelines_for_team,
)
from apps.pipelines.services import (
    pipeline_delete,
    pipeline_update,
    span_rule_create,
    span_rule_delete,
    span_rule_update,
    stage_create,
    stage_delete,
    stage_move,
    stage_update,
)
from apps.teams.access import membership_for_user, membership_for_writer
from apps.teams.current_team import current_team_remember
from apps.teams.models import Membership

DETAIL = "pipelines/detail.html"
# Without htmx, an editor form is shown alone on this page.
EDITOR_FORM = "pipelines/editor_form.html"
EDITOR_ID = "#stage-editor"


@login_required
def pipeline_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    current_team_remember(request, membership.team)
    context = {
        "team": membership.team,
        "can_write": membership.can_write,
        "pipelines": pipelines_for_team(team=membership.team),
        "presets": {k: p for k, p in PRESETS.items() if p.stages},
    }
    return render(request, "pipelines/list.html", context)


CREATE = "pipelines/form.html"


def _preset_initial(key: str | None) -> dict[str, Any]:
    preset = PRESETS.get(key or "")
    if key is None or preset is None:
        return {}
    initial: dict[str, Any] = {"preset": key, "description": preset.description}
    initial.update({f"budget_{p}_ms": ms for p, ms in preset.budget.items()})
    return initial


def _match_initial(query: QueryDict) -> dict[str, str]:
    """Root-span match from a link such as the unmatched-traffic summary's."""
    fields = {"service": "match_service", "root_span": "match_root_span"}
    values = {field: query.get(param) or "" for param, field in fields.items()}
    return {field: value[:200] for field, value in values.items() if value}


def _typed(data: QueryDict) -> dict[str, str]:
    """What was typed into the creation form, to show it again unjudged."""
    return {
        name: str(data.get(name, "")) for name in PipelineCreateForm.base_fields if name in data
    }


@login_required
@require_http_methods(["GET", "POST"])
def pipeline_create_view(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    """The creation form with what its preset will create under the budget typed.

    htmx asks again (GET, the preset and the budgets) whenever they change and gets the
    preview alone; without scripts "Preview the stages" posts the form back, and
    nothing is created until "Create pipeline".
    """
    membership = membership_for_writer(user=request.user, team_slug=team_slug)
    # A link names a preset (checked here) and may fill in fields, as the preview's do.
    typed = {key: value for key, value in _typed(request.GET).items() if key != "preset"}
    shown: dict[str, Any] = _preset_initial(request.GET.get("preset")) | typed
    shown |= _match_initial(request.GET)
    form = PipelineCreateForm(initial=shown)
    if request.method == "POST":
        shown = _typed(request.POST)
        preview_only = "preview" in request.POST
        form = PipelineCreateForm(initial=shown) if preview_only else PipelineCreateForm(shown)
    if form.is_bound and form.is_valid():
        try:
            pipeline = pipeline_create_from_preset(
                team=membership.team, preset=form.cleaned_data["preset"], **form.service_kwargs()
            )
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Pipeline “{pipeline.name}” created.")
            return redirect("pipelines:detail", team_slug=team_slug, pipeline_slug=pipeline.slug)
    context = {
        "team": membership.team,
        "form": form,
        "pipeline": None,
        "preview": PresetPreviewForm({"preset": "blank"} | shown).plan(),
    }
    status = 422 if form.is_bound and form.errors else 200
    return render_page(request, CREATE, context, partial="preset_preview", status=status)


@login_required
@require_http_methods(["GET", "POST"])
def pipeline_edit(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    form = PipelineForm(initial=PipelineForm.initial_for(pipeline))
    if request.method == "POST":
        form = PipelineForm(request.POST)
        if form.is_valid():
            try:
                pipeline = pipeline_update(pipeline=pipeline, **form.service_kwargs())
            except ValidationError as exc:
                add_service_error(form, exc)
            else:
                messages.success(request, f"Pipeline “{pipeline.name}” saved.")
                return redirect(
                    "pipelines:detail", team_slug=team_slug, pipeline_slug=pipeline.slug
                )
    context = {"team": membership.team, "form": form, "pipeline": pipeline}
    return render(request, CREATE, context, status=422 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def pipeline_delete_view(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    if request.method == "POST":
        pipeline_delete(pipeline=pipeline)
        messages.success(request, f"Pipeline “{pipeline.name}” deleted.")
        return redirect("pipelines:list", team_slug=team_slug)
    return render(request, "pipelines/delete.html", {"team": membership.team, "pipeline": pipeline})


@dataclass(frozen=True)
class BarSegment:
    segment: AllocationSegment
    width: str  # CSS percentage of the bar


def allocation_bar(*, pipeline: Pipeline) -> dict[str, Any]:
    """The allocation with segment widths; an over-allocated bar is scaled to fit."""
    allocation: Allocation = pipeline_allocation(pipeline=pipeline)
    scale = max(1.0, allocation.allocated_share)
    return {
        "allocation": allocation,
        "segments": [BarSegment(s, f"{s.share / scale * 100:.2f}") for s in allocation.segments],
        "free_width": f"{max(0.0, 1 - allocation.allocated_share) * 100:.2f}",
        "percent": round(allocation.allocated_share * 100),
        "other_percentile": [s for s in allocation.segments if not s.same_percentile],
    }


def _editor_context(membership: Membership, pipeline: Pipeline) -> dict[str, Any]:
    pipeline = pipeline_with_stages(pipeline=pipeline)
    return {
        "team": membership.team,
        "can_write": membership.can_write,
        "pipeline": pipeline,
        "stages": pipeline.stages.all(),
        "no_stage_rules": pipeline.no_stage_rules.all(),
        "bar": allocation_bar(pipeline=pipeline),
        "stage_form": StageForm(),
    }


@login_required
def pipeline_detail(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    context = _editor_context(membership, pipeline)
    return render_page(request, DETAIL, context, partial="editor")


def editor_changed(
    request: HtmxHttpRequest, membership: Membership, pipeline: Pipeline
) -> HttpResponse:
    """After a change: htmx gets the whole editor (stages and bar), others the page."""
    if not request.htmx:
        return redirect(
            "pipelines:detail", team_slug=pipeline.team.slug, pipeline_slug=pipeline.slug
        )
    context = _editor_context(membership, pipeline)
    response = render_page(request, DETAIL, context, partial="editor")
    # Inline forms target themselves (so errors land in place); a success replaces the editor.
    return reswap(retarget(response, EDITOR_ID), "outerHTML")


def editor_form(
    request: HtmxHttpRequest, membership: Membership, partial: str, context: dict[str, Any]
) -> HttpResponse:
    context |= {"team": membership.team, "can_write": True}
    status = 422 if context["form"].errors else 200
    return render_page(request, DETAIL, context, partial=partial, page=EDITOR_FORM, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def stage_add(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    form = StageForm(request.POST) if request.method == "POST" else StageForm()
    if form.is_bound and form.is_valid():
        try:
            stage_create(pipeline=pipeline, **form.cleaned_data)
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            return editor_changed(request, membership, pipeline)
    context = {"pipeline": pipeline, "stage": None, "form": form}
    return editor_form(request, membership, "stage_form", context)


@login_required
@require_http_methods(["GET", "POST"])
def stage_edit(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, stage_id: int
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    stage = stage_for_pipeline(pipeline=pipeline, stage_id=stage_id)
    form = StageForm(initial=StageForm.initial_for(stage))
    if request.method == "POST":
        form = StageForm(request.POST)
        if form.is_valid():
            try:
                stage_update(stage=stage, **form.cleaned_data)
            except ValidationError as exc:
                add_service_error(form, exc)
            else:
                return editor_changed(request, membership, pipeline)
    context = {"pipeline": pipeline, "stage": stage, "form": form}
    return editor_form(request, membership, "stage_form", context)


@login_required
@require_POST
def stage_delete_view(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, stage_id: int
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    stage_delete(stage=stage_for_pipeline(pipeline=pipeline, stage_id=stage_id))
    return editor_changed(request, membership, pipeline)


@login_required
@require_POST
def stage_move_view(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, stage_id: int
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    stage = stage_for_pipeline(pipeline=pipeline, stage_id=stage_id)
    form = MoveForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Move a stage up or down.")
    stage_move(stage=stage, offset=form.offset)
    return editor_changed(request, membership, pipeline)


def _rule_context(pipeline: Pipeline, stage: Stage, **extra: Any) -> dict[str, Any]:
    return {"pipeline": pipeline, "stage": stage, "rule": None, **extra}


@login_required
@require_http_methods(["GET", "POST"])
def rule_add(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, stage_id: int
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    stage = stage_for_pipeline(pipeline=pipeline, stage_id=stage_id)
    form = SpanRuleForm(request.POST) if request.method == "POST" else SpanRuleForm()
    if form.is_bound and form.is_valid():
        try:
            span_rule_create(stage=stage, **form.cleaned_data)
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            return editor_changed(request, membership, pipeline)
    return editor_form(request, membership, "rule_form", _rule_context(pipeline, stage, form=form))


@login_required
@require_http_methods(["GET", "POST"])
def rule_edit(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, stage_id: int, rule_id: int
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    stage = stage_for_pipeline(pipeline=pipeline, stage_id=stage_id)
    rule = span_rule_for_stage(stage=stage, rule_id=rule_id)
    form = SpanRuleForm(initial=SpanRuleForm.initial_for(rule))
    if request.method == "POST":
        form = SpanRuleForm(request.POST)
        if form.is_valid():
            try:
                span_rule_update(rule=rule, **form.cleaned_data)
            except ValidationError as exc:
                add_service_error(form, exc)
            else:
                return editor_changed(request, membership, pipeline)
    context = _rule_context(pipeline, stage, rule=rule, form=form)
    return editor_form(request, membership, "rule_form", context)


@login_required
@require_POST
def rule_delete(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, stage_id: int, rule_id: int
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    stage = stage_for_pipeline(pipeline=pipeline, stage_id=stage_id)
    span_rule_delete(rule=span_rule_for_stage(stage=stage, rule_id=rule_id))
    return editor_changed(request, membership, pipeline)
