"""One view per operation: recent traces, one trace taken apart, unmatched traffic."""

from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from apps.analysis.selectors import MAX_WATERFALL_SPANS, TraceAnalysis, trace_analysis
from apps.core.api.views import ApiView
from apps.dashboards.apis.serializers import (
    SpanContentOutput,
    TraceDetailOutput,
    TracePageOutput,
    UnmatchedOutput,
    span_content_data,
    summary_data,
    trace_detail_data,
)
from apps.ingest.access import trace_for_team
from apps.ingest.selectors import (
    DEFAULT_WINDOW,
    MAX_SHOWN_VALUES,
    UNMATCHED,
    WINDOWS,
    TraceCursor,
    TraceFilters,
    TraceStatus,
    pipeline_for_filter,
    span_content,
    traces_page,
    unmatched_traffic_recent,
)
from apps.teams.api_schema import team_schema
from apps.teams.request_team import membership_for_request

MAX_DURATION_MS = 3_600_000


def _query(name: str, kind: Any, description: str, **extra: Any) -> OpenApiParameter:
    return OpenApiParameter(name, kind, OpenApiParameter.QUERY, description=description, **extra)


TRACE_HEX = OpenApiParameter(
    "trace_hex",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="The trace id: 32 hex digits, as in OTLP JSON.",
    pattern="^[0-9a-fA-F]{32}$",
)


class TraceListApi(ApiView):
    class FilterSerializer(serializers.Serializer):
        pipeline = serializers.CharField(required=False, allow_blank=True, max_length=50)
        status = serializers.ChoiceField(
            choices=TraceStatus.choices, required=False, allow_blank=True
        )
        min_duration_ms = serializers.IntegerField(
            required=False, min_value=0, max_value=MAX_DURATION_MS
        )
        cursor = serializers.CharField(required=False, allow_blank=True, max_length=64)
        page_size = serializers.IntegerField(required=False, min_value=1, max_value=500, default=50)

    @team_schema(
        summary="The team's finalized traces, newest first",
        description=(
            "Pages by keyset: follow `next` until it is null. Filters combine; "
            f"`pipeline={UNMATCHED}` lists traces that matched no pipeline."
        ),
        parameters=[
            _query(
                "pipeline",
                OpenApiTypes.STR,
                f"A pipeline slug, or `{UNMATCHED}` for traces that matched none.",
            ),
            _query(
                "status",
                OpenApiTypes.STR,
                "`error`: a span failed; `incomplete`: the root never arrived; `ok`: neither.",
                enum=TraceStatus.values,
            ),
            _query("min_duration_ms", OpenApiTypes.INT, "Only traces at least this long."),
            _query("cursor", OpenApiTypes.STR, "The `cursor` of the `next` link; opaque."),
            _query("page_size", OpenApiTypes.INT, "Traces per page, 1 to 500 (default 50)."),
        ],
        responses={200: TracePageOutput},
        tags=["traces"],
    )
    # A page object, not a bare list: name the operation as the other list operations.
    @extend_schema(operation_id="v1_traces_list")
    def get(self, request: Request) -> Response:
        membership = membership_for_request(request)
        query = self.FilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        cursor = None
        if params.get("cursor"):
            try:
                cursor = TraceCursor.decode(params["cursor"])
            except ValueError:
                raise serializers.ValidationError(
                    {"cursor": ["Not a cursor from `next`."]}
                ) from None
        slug = params.get("pipeline") or ""
        pipeline = None
        if slug and slug != UNMATCHED:
            pipeline = pipeline_for_filter(team=membership.team, slug=slug)
            if pipeline is None:
                raise serializers.ValidationError({"pipeline": [f"No pipeline “{slug}” here."]})
        filters = TraceFilters(
            pipeline=pipeline,
            unmatched=slug == UNMATCHED,
            status=params.get("status") or "",
            min_duration_ms=params.get("min_duration_ms"),
        )
        page = traces_page(
            team=membership.team, filters=filters, cursor=cursor, limit=params["page_size"]
        )
        next_url = None
        if page.next_cursor is not None:
            next_url = replace_query_param(
                request.build_absolute_uri(), "cursor", page.next_cursor.encode()
            )
        data = {"next": next_url, "results": [summary_data(t) for t in page.traces]}
        return Response(TracePageOutput(data).data)


class TraceDetailApi(ApiView):
    @team_schema(
        summary="One trace: spans, critical path and stage breakdown",
        description=(
            f"At most {MAX_WATERFALL_SPANS} spans are listed (`spans_truncated`), in tree "
            "order, without their attributes and events: one span's come from "
            "`/api/v1/traces/{trace_hex}/spans/{span_hex}/`. The critical path and "
            "breakdown always cover every span. Per trace, the stages' critical-path time "
            "plus untracked time equals the end-to-end duration (`breakdown.adds_up`). "
            "Once the spans have aged out, or when their names and rule attributes alone "
            "weigh more than the server reads for one trace (`TRACE_VIEW_MAX_BYTES`), the "
            "breakdown comes from the stage samples written when the trace was finalized."
        ),
        parameters=[TRACE_HEX],
        responses={200: TraceDetailOutput},
        tags=["traces"],
    )
    def get(self, request: Request, trace_hex: str) -> Response:
        membership = membership_for_request(request)
        trace = trace_for_team(team=membership.team, trace_hex=trace_hex)
        analysis: TraceAnalysis = trace_analysis(trace=trace, span_limit=MAX_WATERFALL_SPANS)
        return Response(TraceDetailOutput(trace_detail_data(analysis)).data)


class TraceSpanApi(ApiView):
    @team_schema(
        summary="One span's attributes and events",
        description=(
            "Each value is given whole up to `value_chars` characters "
            "(`TRACE_VALUE_DISPLAY_CHARS`, 2000 by default), past that cut to them, with its "
            f"length in `attributes_cut`; at most {MAX_SHOWN_VALUES} attributes, events and "
            "event attributes are given (`entries_truncated`). A span id that is not in the "
            "trace is a 404."
        ),
        parameters=[
            TRACE_HEX,
            OpenApiParameter(
                "span_hex",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                description="The span id: 16 hex digits, as in OTLP JSON.",
                pattern="^[0-9a-fA-F]{16}$",
            ),
        ],
        responses={200: SpanContentOutput},
        tags=["traces"],
    )
    def get(self, request: Request, trace_hex: str, span_hex: str) -> Response:
        membership = membership_for_request(request)
        trace = trace_for_team(team=membership.team, trace_hex=trace_hex)
        content = span_content(trace=trace, span_hex=span_hex)
        if content is None:
            raise Http404("No such span in this trace.")
        data = span_content_data(
            trace_hex=trace_hex.lower(), span_hex=span_hex.lower(), content=content
        )
        return Response(SpanContentOutput(data).data)


class UnmatchedTrafficApi(ApiView):
    class InputSerializer(serializers.Serializer):
        window = serializers.ChoiceField(choices=list(WINDOWS), default=DEFAULT_WINDOW)
        limit = serializers.IntegerField(min_value=1, max_value=100, default=20)

    @team_schema(
        summary="Traffic that matched no pipeline, by root span name and service",
        description="The most frequent groups first, with the match a new pipeline would use.",
        parameters=[
            _query(
                "window",
                OpenApiTypes.STR,
                f"How far back from now (default {DEFAULT_WINDOW}).",
                enum=list(WINDOWS),
            ),
            _query("limit", OpenApiTypes.INT, "Groups to return, 1 to 100 (default 20)."),
        ],
        responses={200: UnmatchedOutput},
        tags=["traces"],
    )
    def get(self, request: Request) -> Response:
        membership = membership_for_request(request)
        query = self.InputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        summary = unmatched_traffic_recent(team=membership.team, **query.validated_data)
        data = {
            "window": summary.window,
            "since": summary.since,
            "total": summary.total,
            "groups": [
                {
                    "root_name": g.root_name,
                    "service": g.service,
                    "count": g.count,
                    "error_count": g.error_count,
                    "p50_ms": g.p50_ms,
                    "p95_ms": g.p95_ms,
                    "last_seen": g.last_seen,
                    "suggested_match": {"service": g.service, "root_span": g.root_span_glob},
                }
                for g in summary.groups
            ],
        }
        return Response(UnmatchedOutput(data).data)
