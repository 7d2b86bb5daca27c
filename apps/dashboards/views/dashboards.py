"""The team home and the pipeline dashboard: observed figures against budgets, live.

A page is its URL (range, percentile, sort, paused or live), so a view can be shared.
htmx swaps the figures region only, when the pickers change and every 15 seconds
while the range ends now; without JavaScript every control is a plain link or form.
"""

from dataclasses import replace

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.views.decorators.http import require_GET

from apps.core.htmx import HtmxHttpRequest, render_page
from apps.core.percentiles import QUANTILES
from apps.core.windows import NAMED_WINDOWS
from apps.dashboards.ranges import (
    DEFAULT_WINDOW,
    REFRESH_SECONDS,
    WHATIF_WINDOWS,
    Range,
    RangeForm,
    range_from,
)
from apps.dashboards.selectors.figures import STATUS_LABELS, default_percentile
from apps.dashboards.selectors.overview import team_overview
from apps.dashboards.selectors.pipeline_page import DEFAULT_SORT, pipeline_page
from apps.dashboards.unmatched_forms import window_for_range
from apps.dashboards.views.recompute import recompute_context
from apps.pipelines.access import pipeline_for_user
from apps.rollups.selectors import WINDOWS
from apps.teams.access import membership_for_user
from apps.teams.current_team import current_team_remember

HOME = "dashboards/team_home.html"
PIPELINE = "dashboards/pipeline.html"
# Past this share of the critical path untracked, the page shows which spans no stage took.
EXPLAIN_UNTRACKED_SHARE = 0.05


def common_context(
    range_form: RangeForm, range_: Range, *, windows: list[str]
) -> dict[str, object]:
    """What every dashboard's pickers need: links that change one thing and keep the rest."""
    return {
        "range_form": range_form,
        "range": range_,
        "query": range_.query(),
        "percentiles": list(QUANTILES),
        "percentile_links": [(p, range_.query(percentile=p)) for p in QUANTILES],
        "window_links": [
            (key, NAMED_WINDOWS[key].label, range_.query(window=key)) for key in windows
        ],
        "pause_query": range_.query(live="0"),
        "resume_query": range_.query(live=""),
        "refresh_seconds": REFRESH_SECONDS,
        "status_labels": STATUS_LABELS,
    }


SORT_COLUMNS = [("name", "Stage"), ("count", "Samples"), ("p50", "p50"), ("p90", "p90"),
                ("p95", "p95"), ("p99", "p99"), ("budget", "Budget"), ("used", "% of budget"),
                ("share", "Critical path"), ("errors", "Errors")]  # fmt: skip


def _sort_params(sort: str, descending: bool) -> dict[str, str]:
    if sort == DEFAULT_SORT:
        return {}
    return {"sort": sort, "dir": "desc" if descending else "asc"}


def _sort_links(range_: Range, sort: str, descending: bool) -> list[tuple[str, str, str, bool]]:
    """Each column's link: by it, descending first for figures; again reverses it."""
    links = []
    for key, label in SORT_COLUMNS:
        active = key == sort
        first_desc = key != "name"
        desc = (not descending) if active else first_desc
        links.append((key, label, range_.query(sort=key, dir="desc" if desc else "asc"), active))
    return links


@login_required
@require_GET
def team_home(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    current_team_remember(request, membership.team)
    form = RangeForm(request.GET, default_percentile="p95")
    range_ = range_from(form)
    window = range_.window if range_.ends_now else "1h"
    rows = team_overview(team=membership.team, percentile=range_.percentile, window=window)
    context = {
        "team": membership.team,
        "membership": membership,
        "rows": rows,
        **common_context(form, range_, windows=["15m", "1h", "6h", "24h"]),
    }
    return render_page(request, HOME, context, partial="figures")


@login_required
@require_GET
def pipeline_dashboard(
    request: HtmxHttpRequest, team_slug: str, pipeline_slug: str
) -> HttpResponse:
    membership, pipeline = pipeline_for_user(
        user=request.user, team_slug=team_slug, pipeline_slug=pipeline_slug
    )
    current_team_remember(request, membership.team)
    form = RangeForm(request.GET, default_percentile=default_percentile(pipeline))
    range_ = range_from(form)
    page = pipeline_page(
        pipeline=pipeline,
        range_=range_,
        sort=request.GET.get("sort", ""),
        descending=request.GET.get("dir") == "desc",
    )
    range_ = replace(range_, extra=tuple(_sort_params(page.sort, page.descending).items()))
    figures = page.figures
    context = {
        "team": membership.team,
        "membership": membership,
        "pipeline": pipeline,
        "page": page,
        "page_query": range_.query(),
        "sort_links": _sort_links(range_, page.sort, page.descending),
        # The what-if panel replays recent traces: the dashboard's window when it has one.
        "whatif_window": range_.window if range_.window in WHATIF_WINDOWS else DEFAULT_WINDOW,
        "unmatched_window": window_for_range(range_),
        # Spans no stage took are worth a look when a stage got none, or much is untracked.
        "explain_unmatched": figures.e2e.count > 0
        and (
            any(not stage.count for stage in figures.stages)
            or (figures.untracked_share or 0) >= EXPLAIN_UNTRACKED_SHARE
        ),
        **common_context(form, range_, windows=[*WINDOWS]),
        **recompute_context(membership=membership, pipeline=pipeline),
    }
    return render_page(request, PIPELINE, context, partial="figures")
