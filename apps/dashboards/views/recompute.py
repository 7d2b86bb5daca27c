"""The pipeline page's recompute panel: start one (writers), and follow its progress (members).

The panel polls itself with htmx while a recompute runs or its rollups are being
rebuilt; without JavaScript the pipeline page shows the same panel on each load.
"""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.analysis.selectors.recompute import recompute_latest, recompute_progress
from apps.analysis.services.recompute import RecomputeBusy, recompute_request
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.dashboards.recompute_forms import RecomputeForm
from apps.pipelines.access import pipeline_for_user
from apps.pipelines.models import Pipeline
from apps.teams.models import Membership

PIPELINE = "dashboards/pipeline.html"
POLL_SECONDS = 2


def recompute_context(
    *, membership: Membership, pipeline: Pipeline, form: RecomputeForm | None = None
) -> dict[str, Any]:
    run = recompute_latest(pipeline=pipeline)
    progress = recompute_progress(run=run) if run is not None else None
    return {
        "recompute": progress,
        "recompute_form": form or RecomputeForm(),
        "recompute_poll": progress is not None
        and (progress.run.in_flight or progress.rollups_pending > 0),
        "recompute_poll_seconds": POLL_SECONDS,
        "can_write": membership.can_write,
    }


def _pipeline_page(pipeline: Pipeline) -> str:
    url = reverse(
        "dashboards:pipeline",
        kwargs={"team_slug": pipeline.team.slug, "pipeline_slug": pipeline.slug},
    )
    return f"{url}#recompute"


@login_required
@require_GET
def recompute_panel(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    if not request.htmx:
        return redirect(_pipeline_page(pipeline))
    context: dict[str, Any] = {"team": membership.team, "pipeline": pipeline}
    context |= recompute_context(membership=membership, pipeline=pipeline)
    return render_page(request, PIPELINE, context, partial="recompute")


@login_required
@require_POST
def recompute_start(request: HtmxHttpRequest, team_slug: str, pipeline_slug: str) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug, write=True
    )
    form = RecomputeForm(request.POST)
    notice, refused = "", True
    if form.is_valid():
        try:
            requested = recompute_request(
                pipeline=pipeline, hours=form.cleaned_data["hours"], user=request.user
            )
        except RecomputeBusy as exc:
            notice = str(exc)
        except ValidationError as exc:
            form.add_error("hours", exc.messages)
        else:
            notice, refused = (
                (
                    "This recompute was already running: its progress is below."
                    if requested.joined
                    else "Recompute queued: a worker starts on it in a moment."
                ),
                False,
            )
            form = RecomputeForm()
    if not request.htmx:
        said = [notice] if notice else [str(error) for error in form.errors.get("hours", [])]
        for text in said:
            (messages.error if refused else messages.success)(request, text)
        return redirect(_pipeline_page(pipeline))
    # A refusal is said in the panel, which htmx swaps in only from a 2xx answer.
    context: dict[str, Any] = {"team": membership.team, "pipeline": pipeline}
    context |= recompute_context(membership=membership, pipeline=pipeline, form=form)
    context |= {"recompute_notice": notice, "recompute_refused": refused}
    return render_page(request, PIPELINE, context, partial="recompute")
