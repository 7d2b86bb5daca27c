"""The what-if page: pick changes, see the pipeline before and after, and its levers.

The page is its URL (window, percentile, one ``change`` per change), so a scenario is
shared by sharing the address. The replays run in the workers; the page never waits
for them: it shows at once what is known and where the runs are, then asks again
(htmx polls its panel; without JavaScript a link does).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url

from apps.core.htmx import HtmxHttpRequest, render_page
from apps.dashboards.selectors.whatif_page import scenario_from_texts, whatif_page
from apps.dashboards.whatif_forms import AddChangeForm, SaveScenarioForm, ScenarioForm
from apps.dashboards.whatif_urls import CHANGE_PARAMETER
from apps.pipelines.access import pipeline_for_user
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import stages_for_pipeline
from apps.rollups.selectors import requested_bounds
from apps.teams.current_team import current_team_remember
from apps.whatif.access import scenario_for_pipeline, whatif_run_for_user
from apps.whatif.changes import change_texts
from apps.whatif.levers import DEFAULT_HIT_RATIO
from apps.whatif.models import RunKind, WhatIfRun
from apps.whatif.params import levers_params, replay_params
from apps.whatif.selectors.runs import scenarios_for_pipeline
from apps.whatif.selectors.sample import DEFAULT_TRACES
from apps.whatif.services import WhatIfBusy, scenario_delete, scenario_save, whatif_run_request

WHATIF = "dashboards/whatif.html"
POLL_SECONDS = 1


def _run(pipeline: Pipeline, kind: str, params: dict[str, object]) -> tuple[WhatIfRun | None, str]:
    try:
        return whatif_run_request(pipeline=pipeline, kind=kind, params=params), ""
    except WhatIfBusy as exc:
        return None, f"{exc} The page asks again in a moment."


def _polled(
    request: HtmxHttpRequest, name: str, team_slug: str, pipeline: Pipeline, kind: str
) -> WhatIfRun | None:
    value = request.GET.get(name, "")
    if not value.isdigit():
        return None
    run = whatif_run_for_user(
        user=request.user, team_slug=team_slug, pipeline=pipeline, run_id=int(value)
    )
    return run if run.kind == kind else None


@login_required
@require_GET
def whatif_page_view(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    current_team_remember(request, membership.team)
    stages = list(stages_for_pipeline(pipeline=pipeline))
    window, percentile = ScenarioForm(request.GET).chosen()
    texts = request.GET.getlist(CHANGE_PARAMETER)
    saved = None
    if request.GET.get("scenario", "").isdigit():
        saved = scenario_for_pipeline(pipeline=pipeline, scenario_id=int(request.GET["scenario"]))
        texts = change_texts(saved.changes)
    scenario = scenario_from_texts(
        pipeline=pipeline, window=window, percentile=percentile, texts=texts, stages=stages
    )
    adding = "op" in request.GET
    add_form = AddChangeForm(request.GET if adding else None, stages=stages)
    if adding and add_form.is_valid():
        scenario.changes.append(add_form.change())
        if not request.htmx:
            return redirect(scenario.canonical)
        add_form = AddChangeForm(stages=stages)
    elif adding:
        for name, errors in add_form.errors.items():
            label = "" if name == "__all__" else f"{add_form.fields[name].label or name.title()}: "
            scenario.errors.extend(f"{label}{error}" for error in errors)

    # A page polling for its runs names them: asking again would move the window on
    # every 10 s and ask new questions while the first are still being answered.
    replay = _polled(request, "run", membership.team.slug, pipeline, RunKind.REPLAY)
    levers = _polled(request, "levers_run", membership.team.slug, pipeline, RunKind.LEVERS)
    busy = levers_busy = ""
    if replay is None or levers is None or adding:
        start, end = requested_bounds(window=window)
        replay_asked = replay_params(
            start=start, end=end, traces=DEFAULT_TRACES, percentile=percentile,
            changes=scenario.changes,
        )  # fmt: skip
        replay, busy = _run(pipeline, RunKind.REPLAY, replay_asked)
        levers_asked = levers_params(
            start=start, end=end, traces=DEFAULT_TRACES, percentile=percentile,
            hit_ratio=DEFAULT_HIT_RATIO, changes=scenario.changes,
        )  # fmt: skip
        levers, levers_busy = _run(pipeline, RunKind.LEVERS, levers_asked)
    context = {
        "team": membership.team,
        "membership": membership,
        "pipeline": pipeline,
        "stages": stages,
        "names": {stage.slug: stage.name for stage in stages},
        "add_form": add_form,
        "busy": busy or levers_busy,
        "scenarios": list(scenarios_for_pipeline(pipeline=pipeline)),
        "saved": saved,
        "save_form": SaveScenarioForm(initial={"name": saved.name if saved else ""}),
        "poll_seconds": POLL_SECONDS,
        **whatif_page(scenario=scenario, replay=replay, levers=levers),
    }
    if context["busy"]:
        context["pending"] = True
    response = render_page(request, WHATIF, context, partial="whatif")
    if request.htmx and adding and not scenario.errors:
        push_url(response, scenario.canonical)
    return response


@login_required
@require_POST
def whatif_save(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    _, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    window, percentile = ScenarioForm(request.POST).chosen()
    scenario = scenario_from_texts(
        pipeline=pipeline, window=window, percentile=percentile,
        texts=request.POST.getlist(CHANGE_PARAMETER),
        stages=list(stages_for_pipeline(pipeline=pipeline)),
    )  # fmt: skip
    form = SaveScenarioForm(request.POST)
    if scenario.errors or not form.is_valid():
        messages.error(request, " ".join(scenario.errors) or "Give the scenario a name.")
        return redirect(scenario.canonical)
    try:
        saved = scenario_save(
            pipeline=pipeline,
            name=form.cleaned_data["name"],
            changes=[change.as_data() for change in scenario.changes],
            user=request.user,
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(scenario.canonical)
    messages.success(request, f"Saved “{saved.name}”.")
    return redirect(scenario.url([*scenario.query(changes=[]), ("scenario", str(saved.pk))]))


@login_required
@require_POST
def whatif_scenario_delete(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str, scenario_id: int
) -> HttpResponse:
    _, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    scenario = scenario_for_pipeline(pipeline=pipeline, scenario_id=scenario_id)
    scenario_delete(scenario=scenario)
    messages.success(request, f"Deleted “{scenario.name}”.")
    return redirect("dashboards:whatif", team_slug=team_slug, pipeline_slug=pipeline_slug)
