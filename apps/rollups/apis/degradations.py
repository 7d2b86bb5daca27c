"""``GET /api/v1/pipelines/{slug}/degradations``: the degradation ledger of a window."""

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.analysis.models import DegradationAction, DegradationWinner
from apps.core.api.views import ApiView
from apps.pipelines.access import pipeline_for_request
from apps.rollups.apis.percentiles import window_parameters
from apps.rollups.apis.serializers import WindowInput
from apps.rollups.selectors.degradations import Tally, pipeline_ledger
from apps.rollups.selectors.windows import to_datetime
from apps.teams.api_schema import team_schema

ACTIONS = [action.label for action in DegradationAction]
WINNERS = [winner.label for winner in DegradationWinner if winner.value]


class _ActionCounts(serializers.Serializer):
    skip = serializers.IntegerField()
    fallback = serializers.IntegerField()
    hedge = serializers.IntegerField()
    cap = serializers.IntegerField()
    timeout = serializers.IntegerField()


class _WinnerCounts(serializers.Serializer):
    primary = serializers.IntegerField()
    fallback = serializers.IntegerField()
    first = serializers.IntegerField()
    second = serializers.IntegerField()


class _TallyOutput(serializers.Serializer):
    decisions = serializers.IntegerField()
    requests_degraded = serializers.IntegerField(help_text="Requests with a decision.")
    rate_percent = serializers.FloatField(allow_null=True, help_text="Of the window's requests.")
    requests_rescued = serializers.IntegerField(
        help_text="Requests that met the deadline only because of the time saved."
    )
    saved_ms = serializers.FloatField(help_text="The clients' estimates, summed.")
    by_action = _ActionCounts()
    winners = _WinnerCounts(help_text="Which attempt answered, of fallbacks and hedges.")


class _StageOutput(_TallyOutput):
    stage = serializers.SlugField()


class DegradationsOutput(serializers.Serializer):
    pipeline = serializers.SlugField()
    to = serializers.DateTimeField()
    requests = serializers.IntegerField(help_text="End-to-end samples in the window.")
    deadline_ms = serializers.IntegerField(allow_null=True)
    rescued_percent = serializers.FloatField(allow_null=True)
    total = _TallyOutput()
    stages = _StageOutput(many=True)

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        fields["from"] = serializers.DateTimeField()  # a keyword in Python
        return fields


def _tally(tally: Tally, requests: int) -> dict[str, Any]:
    return {
        "decisions": tally.decisions,
        "requests_degraded": tally.traces,
        "rate_percent": tally.rate(requests),
        "requests_rescued": tally.rescued,
        "saved_ms": round(tally.saved_ms, 1),
        "by_action": {name: tally.by_action.get(name, 0) for name in ACTIONS},
        "winners": {name: tally.winners.get(name, 0) for name in WINNERS},
    }


EXAMPLE = {
    "pipeline": "rag-chat",
    "from": "2026-12-06T10:00:00Z",
    "to": "2026-12-06T11:00:00Z",
    "requests": 18000,
    "deadline_ms": 2500,
    "rescued_percent": 3.1,
    "total": {
        "decisions": 1240, "requests_degraded": 1180, "rate_percent": 6.6,
        "requests_rescued": 560, "saved_ms": 1490000.0,
        "by_action": {"skip": 300, "fallback": 610, "hedge": 290, "cap": 40, "timeout": 0},
        "winners": {"primary": 0, "fallback": 610, "first": 120, "second": 170},
    },
    "stages": [],
}  # fmt: skip


class PipelineDegradationsApi(ApiView):
    InputSerializer = WindowInput

    @team_schema(
        summary="The degradation ledger of a pipeline over a window",
        description=(
            "What run-time clients did to keep the pipeline's requests within their "
            "deadline, counted from the `latency_budget.decision` span events of its "
            "traces (docs/runtime.md): decisions per stage and action, the share of the "
            "window's requests with one, the milliseconds the clients estimate they saved, "
            "and the requests rescued: those that met the pipeline's deadline and would "
            "not have without that time. Every stage of the pipeline is listed, in order."
        ),
        parameters=window_parameters(),
        responses={200: DegradationsOutput},
        tags=["percentiles"],
    )
    @extend_schema(examples=[OpenApiExample("The last hour", value=EXAMPLE, response_only=True)])
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        query = self.InputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end = query.bounds()
        ledger = pipeline_ledger(pipeline=pipeline, start=start, end=end)
        data = {
            "pipeline": pipeline.slug,
            "from": to_datetime(start),
            "to": to_datetime(end),
            "requests": ledger.requests,
            "deadline_ms": pipeline.deadline_ms,
            "rescued_percent": ledger.rescued_share,
            "total": _tally(ledger.total, ledger.requests),
            "stages": [
                {"stage": row.stage.slug, **_tally(row.tally, ledger.requests)}
                for row in ledger.stages
            ],
        }
        return Response(DegradationsOutput(data).data)
