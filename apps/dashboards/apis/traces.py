"""One view per operation: recent traces, one trace taken apart, unmatched traffic."""

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
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
from apps.dashboards.selectors.trace_list import trace_list_page
from apps.dashboards.trace_query import (
    CUSTOM,
    MAX_ATTRIBUTE_FILTERS,
    MAX_DURATION_MS,
    trace_query_clean,
)
from apps.ingest.access import trace_for_team
from apps.ingest.models import ATTRIBUTE_KEY_MAX_CHARS, ATTRIBUTE_VALUE_MAX_CHARS
from apps.ingest.selectors import (
    DEFAULT_WINDOW,
    MAX_SHOWN_VALUES,
    UNMATCHED,
    WINDOWS,
    TraceSort,
    TraceStatus,
    span_content,
    unmatched_traffic_recent,
)
from apps.pipelines.selectors import pipelines_for_team
from apps.rollups.selectors import WINDOWS as RANGES
from apps.teams.api_schema import team_schema
from apps.teams.request_team import membership_for_request


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
    class PageSerializer(serializers.Serializer):
        page_size = serializers.IntegerField(required=False, min_value=1, max_value=500, default=50)

    @team_schema(
        summary="The team's analyzed traces, filtered and in the order asked for",
        description=(
            "Pages by keyset: follow `next` until it is null; it keeps every filter and the "
            f"order. Filters combine (all must hold); `pipeline={UNMATCHED}` lists traces that "
            "matched no pipeline. The same parameters as the trace list page, whose URL can "
            "be turned into an API call as it is."
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
            _query(
                "min_duration_ms", OpenApiTypes.INT,
                f"Only traces at least this long (0 to {MAX_DURATION_MS}).",
            ),
            _query(
                "max_duration_ms", OpenApiTypes.INT,
                f"Only traces at most this long (0 to {MAX_DURATION_MS}).",
            ),
            _query(
                "stage", OpenApiTypes.STR,
                "A stage slug of the `pipeline` given: traces that ran it; with "
                "`stage_over_budget` or `min_critical_share`, how.",
            ),
            _query(
                "stage_over_budget", OpenApiTypes.BOOL,
                "The stage's wall time in the trace above the stage's budget.",
            ),
            _query(
                "min_critical_share", OpenApiTypes.INT,
                "The stage's share of the trace's critical path, at least this percentage.",
            ),
            _query(
                "degraded", OpenApiTypes.BOOL,
                "A run-time client recorded a decision on the trace (skip, fallback, hedge, "
                "cap, timeout): at the `stage` when one is given, else at any stage.",
            ),
            OpenApiParameter(
                "attr", OpenApiTypes.STR, OpenApiParameter.QUERY, many=True,
                explode=True,
                description=(
                    f"`key=value`, up to {MAX_ATTRIBUTE_FILTERS}: some span of the trace (the "
                    "root or any other) carried the attribute with that value; `service.name` "
                    "is each span's service. Values compare as text (`42` finds 42, 42.0 "
                    "and \"42\"); lists and maps never match; keys past "
                    f"{ATTRIBUTE_KEY_MAX_CHARS} characters and values past "
                    f"{ATTRIBUTE_VALUE_MAX_CHARS} are not kept, so are refused."
                ),
            ),
            _query(
                "window", OpenApiTypes.STR,
                "Traces started in this range back from now; none: every kept trace.",
                enum=[*RANGES, CUSTOM],
            ),
            _query(
                "from", OpenApiTypes.DATETIME,
                "Traces started at or after (RFC 3339, or YYYY-MM-DDTHH:MM[:SS] in UTC).",
            ),
            _query("to", OpenApiTypes.DATETIME, "Traces started before; default now."),
            _query(
                "sort", OpenApiTypes.STR,
                "`newest` (default) or `oldest` by the root's start; `slowest` or `fastest` "
                "by duration.",
                enum=TraceSort.values,
            ),
            _query("cursor", OpenApiTypes.STR, "The `cursor` of the `next` link; opaque."),
            _query("page_size", OpenApiTypes.INT, "Traces per page, 1 to 500 (default 50)."),
        ],
        responses={200: TracePageOutput},
        tags=["traces"],
    )  # fmt: skip
    # A page object, not a bare list: name the operation as the other list operations.
    @extend_schema(operation_id="v1_traces_list")
    def get(self, request: Request) -> Response:
        membership = membership_for_request(request)
        paging = self.PageSerializer(data=request.query_params)
        errors: dict[str, Any] = {} if paging.is_valid() else dict(paging.errors)
        pipelines = list(pipelines_for_team(team=membership.team).prefetch_related("stages"))
        try:
            query = trace_query_clean(params=request.query_params, pipelines=pipelines)
        except DjangoValidationError as exc:
            errors |= exc.message_dict
        if errors:
            raise serializers.ValidationError(errors)
        result = trace_list_page(
            team=membership.team, query=query, limit=paging.validated_data["page_size"]
        )
        next_url = None
        if result.page.next_cursor is not None:
            next_url = replace_query_param(
                request.build_absolute_uri(), "cursor", result.page.next_cursor.encode()
            )
        data = {"next": next_url, "results": [summary_data(t) for t in result.page.traces]}
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
