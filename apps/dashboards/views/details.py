"""A stage of a pipeline, its violations, and the budget fit check with its suggestions."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from apps.analysis.selectors.rule_test import rule_test
from apps.analysis.stage_matching import DEFAULT_FIRST_TOKEN_EVENT, WHOLE, RuleSpec
from apps.core.figures import format_ms
from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.core.time import FINEST_RESOLUTION, align_down, to_datetime, to_seconds
from apps.dashboards.ranges import RangeForm, range_from
from apps.dashboards.selectors.figures import pipeline_figures
from apps.dashboards.selectors.stage_page import stage_page
from apps.dashboards.unmatched_forms import window_for_range
from apps.dashboards.views.dashboards import common_context
from apps.pipelines.access import (
    no_stage_rule_for_pipeline,
    pipeline_for_user,
    span_rule_for_stage,
    stage_for_pipeline,
)
from apps.pipelines.forms import (
    NoStageRuleForm,
    SpanConditionsForm,
    SpanRuleForm,
)
from apps.pipelines.models import NoStageRule, Pipeline, SpanRule, Stage
from apps.pipelines.services import (
    CONDITION_FIELDS,
    pipeline_budgets_set,
    span_conditions_validate,
)
from apps.rollups.access import violation_for_team
from apps.rollups.selectors import WINDOWS, pipeline_percentiles
from apps.rollups.selectors.fit import pipeline_fit_recent
from apps.rollups.selectors.fit_suggestions import HEADROOM
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
        "can_write": membership.can_write,
        "page": stage_page(pipeline=pipeline, stage=stage, range_=range_),
        "unmatched_window": window_for_range(range_),
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
    context = {
        "team": membership.team,
        "pipeline": pipeline,
        "fit": pipeline_fit_recent(pipeline=pipeline),
        "headroom": HEADROOM,
        "can_write": membership.can_write,
    }
    return render_page(request, FIT, context, partial="fit")


def _applied(request: HtmxHttpRequest) -> tuple[dict[int, int], dict[str, int]]:
    """The budgets the editor saw: ``stage-<id>`` and ``e2e-<percentile>`` fields, in ms."""
    stages: dict[int, int] = {}
    e2e: dict[str, int] = {}
    for name, value in request.POST.items():
        if name.startswith("stage-"):
            stages[int(name.removeprefix("stage-"))] = int(str(value))
        elif name.startswith("e2e-"):
            e2e[name.removeprefix("e2e-")[:10]] = int(str(value))
    return stages, e2e


@login_required
@require_POST
def fit_apply(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    """Set the budgets of the plan the editor chose, as the page showed them."""
    _, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    back = redirect("dashboards:pipeline", team_slug=team_slug, pipeline_slug=pipeline_slug)
    try:
        stages, e2e = _applied(request)
    except ValueError:
        messages.error(request, "Budgets are whole milliseconds by stage. Nothing was changed.")
        return back
    try:
        changed = pipeline_budgets_set(pipeline=pipeline, stage_budgets_ms=stages, e2e_ms=e2e)
    except ValidationError as exc:
        detail = "; ".join(str(m) for m in exc.messages)
        messages.error(request, f"The budgets were not changed: {detail}")
        return back
    done = [f"{len(changed)} stage budget{pluralize(len(changed))}"] if changed else []
    done += [f"the end-to-end {p} budget ({format_ms(ms)})" for p, ms in e2e.items()]
    messages.success(request, f"Set from the fit check: {' and '.join(done) or 'nothing'}.")
    return back


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


def _edited_id(request: HtmxHttpRequest) -> int | None:
    """The id of the rule being edited (``rule``), if it is one a database key can hold:
    the test itself needs none."""
    edited = request.GET.get("rule", "")
    return int(edited) if edited.isascii() and edited.isdigit() and len(edited) < 19 else None


def _rule_test_page(
    request: HtmxHttpRequest,
    membership: Membership,
    pipeline: Pipeline,
    stage: Stage | None,
    form: SpanConditionsForm,
    rule: SpanRule | NoStageRule | None,
) -> HttpResponse:
    """htmx gets the result alone, beside the form; without scripts this is a page with
    the form, as typed, above the result, so the rule can be changed, tested again or
    saved."""
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
        "rule": rule,
        "can_write": membership.can_write,
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
    edited = _edited_id(request)
    rule = span_rule_for_stage(stage=stage, rule_id=edited) if edited is not None else None
    return _rule_test_page(request, membership, pipeline, stage, SpanRuleForm(request.GET), rule)


@login_required
@require_GET
def no_stage_rule_tester(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str
) -> HttpResponse:
    """A no-stage rule being typed, tried on the pipeline's recent traces."""
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    edited = _edited_id(request)
    rule = (
        no_stage_rule_for_pipeline(pipeline=pipeline, rule_id=edited)
        if edited is not None
        else None
    )
    form = NoStageRuleForm(request.GET)
    return _rule_test_page(request, membership, pipeline, None, form, rule)
