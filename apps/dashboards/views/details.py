"""A stage of a pipeline, its violations, and the budget fit check with its suggestions."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from apps.analysis.selectors.rule_test import rule_test
from apps.analysis.stage_matching import DEFAULT_FIRST_TOKEN_EVENT, WHOLE, RuleSpec
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.core.time import FINEST_RESOLUTION, align_down, to_datetime, to_seconds
from apps.dashboards.ranges import RangeForm, range_from
from apps.dashboards.selectors.figures import pipeline_figures
from apps.dashboards.selectors.stage_page import stage_page
from apps.dashboards.views.dashboards import common_context
from apps.pipelines.access import pipeline_for_user, stage_for_pipeline
from apps.pipelines.forms import (
    NoStageRuleForm,
    SpanConditionsForm,
    SpanRuleForm,
    add_service_error,
)
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.services import (
    CONDITION_FIELDS,
    span_conditions_validate,
    stage_budgets_set,
)
from apps.rollups.access import violation_for_team
from apps.rollups.selectors import WINDOWS, pipeline_percentiles
from apps.rollups.selectors.fit import pipeline_fit_recent
from apps.rollups.selectors.violations import CLOSED, OPEN, violations_for_team
from apps.teams.access import membership_for_user
from apps.teams.current_team import current_team_remember
from apps.teams.models import Membership

STAGE = "dashboards/stage.html"
VIOLATIONS = "dashboards/violations.html"
VIOLATION = "dashboards/violation.html"
FIT = "dashboards/fit.html"
RULE_TEST = "dashboards/rule_test.html"
VIOLATIONS_SHOWN = 200


@login_required
@require_GET
def stage_dashboard(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, stage_slug: str
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    current_team_remember(request, membership.team)
    stage = get_object_or_404(Stage, pipeline=pipeline, slug=stage_slug)
    form = RangeForm(request.GET, default_percentile=stage.budget_percentile)
    range_ = range_from(form)
    context = {
        "team": membership.team,
        "pipeline": pipeline,
        "stage": stage,
        "page": stage_page(pipeline=pipeline, stage=stage, range_=range_),
        **common_context(form, range_, windows=[*WINDOWS]),
    }
    return render_page(request, STAGE, context, partial="figures")


@login_required
@require_GET
def violation_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    current_team_remember(request, membership.team)
    pipeline_slug = request.GET.get("pipeline", "")[:50]
    state = request.GET.get("state", "")
    state = state if state in (OPEN, CLOSED) else ""
    violations = violations_for_team(team=membership.team, pipeline_slug=pipeline_slug, state=state)
    context = {
        "team": membership.team,
        "violations": list(violations[:VIOLATIONS_SHOWN]),
        "shown": VIOLATIONS_SHOWN,
        "pipelines": list(Pipeline.objects.filter(team=membership.team).order_by("name")),
        "pipeline_slug": pipeline_slug,
        "state": state,
        "now": timezone.now(),
    }
    return render_page(request, VIOLATIONS, context, partial="results")


@login_required
@require_GET
def violation_detail(request: HtmxHttpRequest, team_slug: str, violation_id: int) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    current_team_remember(request, membership.team)
    violation = violation_for_team(team=membership.team, violation_id=violation_id)
    # The stage breakdown at the time: the window the latest evaluation read.
    end = align_down(
        to_seconds(violation.closed_at or violation.last_evaluated_at), FINEST_RESOLUTION
    )
    start = align_down(
        min(to_seconds(violation.opened_at), end - violation.window_s), FINEST_RESOLUTION
    )
    percentile = violation.percentile
    figures = pipeline_figures(
        percentiles=pipeline_percentiles(
            pipeline=violation.pipeline, start=start, end=end, critical_sketches=False
        ),
        percentile=percentile,
    )
    context = {
        "team": membership.team,
        "violation": violation,
        "figures": figures,
        "window_start": to_datetime(start),
        "window_end": to_datetime(end),
        "now": timezone.now(),
    }
    return render_page(request, VIOLATION, context)


@login_required
@require_GET
def fit_check(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    fit = pipeline_fit_recent(pipeline=pipeline)
    suggestions = [
        s for s in fit.stages if s.suggested_ms is not None and s.suggested_ms != s.budget_ms
    ]
    context = {
        "team": membership.team,
        "pipeline": pipeline,
        "fit": fit,
        "suggestions": suggestions,
        "can_write": membership.can_write,
    }
    return render_page(request, FIT, context, partial="fit")


@login_required
@require_POST
def fit_apply(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    """Set the suggested budgets the editor saw (one ``stage-<id>`` field each)."""
    _, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    budgets: dict[int, int] = {}
    for name in request.POST:
        if not name.startswith("stage-"):
            continue
        value = request.POST.get(name, "")
        try:
            budgets[int(name.removeprefix("stage-"))] = int(value)
        except ValueError:
            messages.error(request, f"Not a budget in ms: {value[:20]!r}. Nothing was changed.")
            return redirect("dashboards:pipeline", team_slug=team_slug, pipeline_slug=pipeline_slug)
    try:
        changed = stage_budgets_set(pipeline=pipeline, budgets_ms=budgets)
    except ValidationError as exc:
        detail = "; ".join(str(m) for m in exc.messages)
        messages.error(request, f"The budgets were not changed: {detail}")
    else:
        messages.success(request, f"Budgets set for {len(changed)} stage(s) from the fit check.")
    return redirect("dashboards:pipeline", team_slug=team_slug, pipeline_slug=pipeline_slug)


def _rule_spec(form: SpanConditionsForm) -> RuleSpec:
    data = form.cleaned_data
    return RuleSpec(
        span_name=data["span_name"],
        name_match=data["name_match"],
        attributes=data["attributes"],
        span_kind=data["span_kind"],
        service=data["service"],
        portion=data.get("portion", WHOLE),
        first_token_event=data.get("first_token_event", DEFAULT_FIRST_TOKEN_EVENT),
    )


def _rule_test_page(
    request: HtmxHttpRequest,
    membership: Membership,
    pipeline: Pipeline,
    stage: Stage | None,
    form: SpanConditionsForm,
) -> HttpResponse:
    result = None
    if form.is_valid() and not form.empty:
        conditions = {name: form.cleaned_data[name] for name in CONDITION_FIELDS}
        try:
            span_conditions_validate(**conditions)
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            result = rule_test(pipeline=pipeline, stage=stage, spec=_rule_spec(form))
    context = {
        "team": membership.team,
        "pipeline": pipeline,
        "stage": stage,
        "form": form,
        "result": result,
        "empty_rule": not form.errors and form.empty,
    }
    return render_page(request, RULE_TEST, context, partial="result")


@login_required
@require_GET
def rule_tester(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, stage_id: int
) -> HttpResponse:
    """The rule being typed on the stage editor, tried on the pipeline's recent traces."""
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    stage = stage_for_pipeline(pipeline=pipeline, stage_id=stage_id)
    return _rule_test_page(request, membership, pipeline, stage, SpanRuleForm(request.GET))


@login_required
@require_GET
def no_stage_rule_tester(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str
) -> HttpResponse:
    """A no-stage rule being typed, tried on the pipeline's recent traces."""
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    return _rule_test_page(request, membership, pipeline, None, NoStageRuleForm(request.GET))
