"""The spans of a pipeline's recent traces that no stage took, and a rule from them.

The rule page is the rule tester pre-filled with a group's suggested rule: what the
rule would take in recent traces shows as it is edited, and editors save it from there.
"""

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.analysis.selectors.rule_test import rule_test
from apps.analysis.selectors.unmatched_spans import unmatched_spans_recent
from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.core.windows import NAMED_WINDOWS
from apps.dashboards.unmatched_forms import (
    UnmatchedRuleForm,
    UnmatchedWindowForm,
    suggestion_query,
)
from apps.pipelines.access import pipeline_for_user
from apps.pipelines.selectors import pipeline_with_stages
from apps.pipelines.services import span_rule_create
from apps.teams.current_team import current_team_remember

PAGE = "dashboards/unmatched_spans.html"
RULE = "dashboards/unmatched_rule.html"
COMPACT_GROUPS = 5
GROUPS = 50


@login_required
@require_GET
def unmatched_spans_view(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    current_team_remember(request, membership.team)
    window = UnmatchedWindowForm(request.GET).window_key
    compact = request.GET.get("compact") == "1"
    found = unmatched_spans_recent(
        pipeline=pipeline, window=window, limit=COMPACT_GROUPS if compact else GROUPS
    )
    stage_names = {stage.slug: stage.name for stage in found.stages}
    context = {
        "team": membership.team,
        "pipeline": pipeline,
        "can_write": membership.can_write,
        # Unbound, so the select shows the window in use even when a bad one was asked.
        "form": UnmatchedWindowForm(initial={"window": window}),
        "window": window,
        "found": found,
        "compact": compact,
        "stage_choices": list(stage_names.items()),
        "window_label": NAMED_WINDOWS[window].label,
        # Each group with the rule form's fields of its suggested rule.
        "rows": [
            (group, suggestion_query(group.suggestion) if group.suggestion else {})
            for group in found.groups
        ],
    }
    return render_page(request, PAGE, context, partial="groups")


@login_required
@require_http_methods(["GET", "POST"])
def unmatched_rule_view(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str
) -> HttpResponse:
    """GET: the rule tested on recent traces (htmx: the result alone); POST: saved."""
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    pipeline = pipeline_with_stages(pipeline=pipeline)
    data = request.POST if request.method == "POST" else request.GET
    form = UnmatchedRuleForm(data if data else None, pipeline=pipeline)
    back = reverse(
        "dashboards:unmatched_spans",
        kwargs={"team_slug": team_slug, "pipeline_slug": pipeline.slug},
    )
    valid = form.is_valid()
    if valid and request.method == "POST":
        stage = form.chosen_stage
        try:
            rule = span_rule_create(stage=stage, **form.rule_fields())
        except ValidationError as exc:
            add_service_error(form, exc)
            valid = False
        else:
            messages.success(
                request,
                f"Rule “{rule.describe()}” added to {stage.name}. The page below already "
                "reads with it; dashboards count it in traces that arrive from now on.",
            )
            window = form.cleaned_data.get("window")
            return redirect(f"{back}?{urlencode({'window': window})}" if window else back)
    result = None
    empty_rule = valid and form.empty_rule
    if valid and not empty_rule:
        result = rule_test(pipeline=pipeline, stage=form.chosen_stage, spec=form.spec())
    context = {
        "team": membership.team,
        "pipeline": pipeline,
        "form": form,
        "result": result,
        "empty_rule": empty_rule,
        "back_url": back,
    }
    status = 422 if form.errors and request.method == "POST" else 200
    return render_page(request, RULE, context, partial="test", status=status)
