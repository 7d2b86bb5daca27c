"""The trace explorer: recent traces, one trace's waterfall, and unmatched traffic."""

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from apps.analysis.selectors import MAX_WATERFALL_SPANS, trace_analysis
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.core.models import QuarantineKind
from apps.core.quarantine import quarantine_reason
from apps.core.time import ns_to_datetime, ns_to_ms
from apps.core.windows import NAMED_WINDOWS
from apps.dashboards.selectors.trace_list import StageTime, TraceListPage, trace_list_page
from apps.dashboards.views.filters import TraceFilterForm, TraceListLinks, WindowForm
from apps.dashboards.views.waterfall import WaterfallAsk, ticks, waterfall_page
from apps.ingest.access import trace_for_user
from apps.ingest.models import TraceState
from apps.ingest.selectors import (
    TracePage,
    TraceSort,
    TraceSummary,
    span_content,
    unmatched_traffic_recent,
)
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import pipelines_for_team
from apps.teams.access import membership_for_user
from apps.teams.current_team import current_team_remember

LIST = "dashboards/traces.html"
DETAIL = "dashboards/trace_detail.html"
UNMATCHED = "dashboards/unmatched.html"
PAGE_SIZE = 50
# Waterfall rows a page: a compact row weighs about 0.45 KB, so a thousand would make
# the page three times its 150 KB goal; 250 leave room for long span names.
ROWS_PER_PAGE = 250
TEASER_ROWS = 5


@login_required
@require_GET
def trace_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    current_team_remember(request, membership.team)
    pipelines = list(pipelines_for_team(team=membership.team).prefetch_related("stages"))
    form = TraceFilterForm(request.GET, pipelines=pipelines)
    result = None
    if form.is_valid() and form.query is not None:
        result = trace_list_page(team=membership.team, query=form.query, limit=PAGE_SIZE)
    list_url = reverse("traces:list", kwargs={"team_slug": membership.team.slug})
    links = TraceListLinks(list_url, request.GET)
    sort = form.query.sort if form.query else TraceSort.NEWEST
    next_cursor = result.page.next_cursor if result else None
    context = {
        "team": membership.team,
        "form": form,
        "query": form.query,
        "page": result.page if result else TracePage([], None),
        "rows": _listed_rows(result, list_url, membership.team.slug, pipelines) if result else [],
        "list_url": list_url,
        "next_url": links.with_changes(cursor=next_cursor.encode()) if next_cursor else None,
        "first_url": links.with_changes(cursor=""),
        "start_sort_url": links.with_changes(
            sort=TraceSort.OLDEST if sort == TraceSort.NEWEST else TraceSort.NEWEST, cursor=""
        ),
        "duration_sort_url": links.with_changes(
            sort=TraceSort.FASTEST if sort == TraceSort.SLOWEST else TraceSort.SLOWEST, cursor=""
        ),
        "paged": bool(request.GET.get("cursor")),
    }
    return render_page(request, LIST, context, partial="results")


@dataclass(frozen=True)
class ListedRow:
    item: TraceSummary
    stage_time: StageTime | None
    detail_url: str
    pipeline_url: str


def _listed_rows(
    result: TraceListPage, list_url: str, team_slug: str, pipelines: list[Pipeline]
) -> list[ListedRow]:
    """The page's rows with their links: a trace's page is under the list's URL, and
    reversing 100 URLs a page would cost more than its query."""
    pipeline_urls = {
        p.pk: reverse("pipelines:detail", kwargs={"team_slug": team_slug, "pipeline_slug": p.slug})
        for p in pipelines
    }
    return [
        ListedRow(
            row.item,
            row.stage_time,
            f"{list_url}{row.item.trace_id}/",
            pipeline_urls.get(row.item.trace.pipeline_id or 0, ""),
        )
        for row in result.rows
    ]


@login_required
@require_GET
def trace_detail(request: HtmxHttpRequest, team_slug: str, trace_hex: str) -> HttpResponse:
    membership, trace = trace_for_user(user=request.user, team_slug=team_slug, trace_hex=trace_hex)
    asked = WaterfallAsk(
        rows=request.GET.get("rows"),
        span=request.GET.get("span"),
        size=ROWS_PER_PAGE,
        limit=MAX_WATERFALL_SPANS,
    )
    analysis = trace_analysis(trace=trace, span_limit=asked.to_analyze)
    waterfall = waterfall_page(
        analysis, asked, content=lambda span_hex: span_content(trace=trace, span_hex=span_hex)
    )
    hex_id = bytes(trace.trace_id).hex()
    context = {
        "team": membership.team,
        "trace": trace,
        "trace_hex": hex_id,
        "detail_url": reverse(
            "traces:detail", kwargs={"team_slug": membership.team.slug, "trace_hex": hex_id}
        ),
        "state": trace.state_label(timezone.now()),
        "settle_seconds": settings.TRACE_SETTLE_SECONDS,
        "idle_seconds": settings.TRACE_IDLE_SECONDS,
        "max_wait_seconds": settings.TRACE_MAX_WAIT_SECONDS,
        "started_at": ns_to_datetime(trace.start_ns) if trace.start_ns is not None else None,
        "analysis": analysis,
        "waterfall": waterfall,
        "rows": waterfall.rows,
        "span": waterfall.span,
        "ticks": ticks(analysis),
        "e2e_ms": ns_to_ms(analysis.e2e_ns),
        "untracked_ms": ns_to_ms(analysis.untracked_critical_ns),
        "untracked_percent": (
            round(analysis.untracked_critical_ns / analysis.e2e_ns * 100, 1)
            if analysis.e2e_ns
            else 0.0
        ),
        "critical_sum_ms": ns_to_ms(analysis.critical_sum_ns),
        "span_limit": MAX_WATERFALL_SPANS,
        "quarantine_reason": (
            quarantine_reason(kind=QuarantineKind.TRACE, item_id=trace.pk)
            if trace.state == TraceState.QUARANTINED
            else None
        ),
    }
    # htmx asks for a span's details, for the next rows, or (closing the details) for the
    # bare URL: each gets only the region it swaps.
    asks_rows = "rows" in request.GET and "span" not in request.GET
    return render_page(request, DETAIL, context, partial="rows" if asks_rows else "span-panel")


@login_required
@require_GET
def unmatched_traffic_view(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    window = WindowForm(request.GET).window_key
    compact = request.GET.get("compact") == "1"
    summary = unmatched_traffic_recent(
        team=membership.team, window=window, limit=TEASER_ROWS if compact else 50
    )
    # Unbound, so the select shows the window in use even when none or a bad one was asked.
    form = WindowForm(initial={"window": window})
    context = {
        "team": membership.team,
        "can_write": membership.can_write,
        "form": form,
        "summary": summary,
        "window_label": NAMED_WINDOWS[summary.window].label,
        "compact": compact,
        "create_url": reverse("pipelines:create", kwargs={"team_slug": membership.team.slug}),
    }
    return render_page(request, UNMATCHED, context, partial="summary")
