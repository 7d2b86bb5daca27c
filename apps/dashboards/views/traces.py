"""The trace explorer: recent traces, one trace's waterfall, and unmatched traffic."""

from functools import partial
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from apps.analysis.selectors import MAX_WATERFALL_SPANS, trace_analysis
from apps.analysis.selectors.samples import traces_by_stage
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.core.models import QuarantineKind
from apps.core.quarantine import quarantine_reason
from apps.core.time import ns_to_datetime, ns_to_ms
from apps.dashboards.views.filters import TraceFilterForm, WindowForm
from apps.dashboards.views.waterfall import WaterfallAsk, ticks, waterfall_page
from apps.ingest.access import trace_for_user
from apps.ingest.models import TraceState
from apps.ingest.selectors import TracePage, span_content, traces_page, unmatched_traffic_recent
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
    page = TracePage([], None)
    next_query = None
    if form.is_valid():
        by_stage = form.stage_filter()
        narrow = None
        if by_stage is not None:
            stage, over_budget, share = by_stage
            narrow = partial(
                traces_by_stage, stage=stage, over_budget=over_budget, min_critical_share=share
            )
        page = traces_page(
            team=membership.team,
            filters=form.filters(),
            cursor=form.cleaned_data["cursor"],
            limit=PAGE_SIZE,
            narrow=narrow,
        )
        if page.next_cursor is not None:
            params = request.GET.copy()
            params["cursor"] = page.next_cursor.encode()
            next_query = params.urlencode()
    first_query = urlencode(
        {k: v for k, v in request.GET.items() if k != "cursor" and v}, doseq=False
    )
    context = {
        "team": membership.team,
        "form": form,
        "page": page,
        "next_query": next_query,
        "first_query": first_query,
        "paged": bool(request.GET.get("cursor")),
    }
    return render_page(request, LIST, context, partial="results")


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
        "idle_seconds": settings.TRACE_IDLE_SECONDS,
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
        "compact": compact,
        "create_url": reverse("pipelines:create", kwargs={"team_slug": membership.team.slug}),
    }
    return render_page(request, UNMATCHED, context, partial="summary")
