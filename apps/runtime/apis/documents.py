"""``GET /v1/budgets/{pipeline}``: the runtime document, for the run-time client.

Authenticated by the team's metrics token, the read-only token of its figures; the token
names the team. Answers ``304`` to ``If-None-Match`` with the
current tag, so a fleet of instances polling costs a cache read each.
"""

from typing import Any

from django.conf import settings
from django.http import HttpResponse
from django.utils.http import parse_etags
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from apps.core.api.schema import ErrorSerializer
from apps.pipelines.services import pipeline_runtime_read
from apps.runtime.access import pipeline_for_token
from apps.runtime.auth import HasMetricsToken, MetricsTokenAuthentication, request_metrics_token
from apps.runtime.selectors import runtime_document
from apps.runtime.throttling import RuntimeDocumentThrottle
from apps.teams.tokens import METRICS_TOKEN_PREFIX


class MetricsTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.runtime.auth.MetricsTokenAuthentication"
    name = "metricsToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": (
                f"A team metrics token ({METRICS_TOKEN_PREFIX}…), made on the team's Metrics "
                "page: read-only, the team's figures."
            ),
        }


class _Observed(serializers.Serializer):
    count = serializers.IntegerField()
    p50 = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)
    p99 = serializers.FloatField(allow_null=True)


class _WindowObserved(_Observed):
    window_s = serializers.IntegerField()


class _StageBudget(serializers.Serializer):
    percentile = serializers.ChoiceField(choices=["p50", "p90", "p95", "p99"])
    ms = serializers.IntegerField()


class _Stage(serializers.Serializer):
    stage = serializers.SlugField()
    position = serializers.IntegerField()
    budget = _StageBudget(allow_null=True)
    observed = _Observed()
    uncut = _WindowObserved(
        help_text="The stage's times in the holdout: the requests run without levers."
    )


class _Objective(serializers.Serializer):
    target = serializers.FloatField()
    threshold_ms = serializers.IntegerField()


class RuntimeDocumentOutput(serializers.Serializer):
    """Describes the document for the schema; the view sends the cached bytes."""

    version = serializers.IntegerField()
    pipeline = serializers.SlugField()
    deadline_ms = serializers.IntegerField(allow_null=True)
    budget = serializers.DictField(child=serializers.IntegerField())
    objective = _Objective(allow_null=True)
    observed = _WindowObserved()
    stages = _Stage(many=True)
    holdout_percent = serializers.FloatField(min_value=0, max_value=100)
    refresh_s = serializers.IntegerField()


UNAUTHENTICATED = "Missing, unknown or revoked metrics token (API and ingest tokens are refused)."
NOT_FOUND = "No pipeline of this slug in the token's team."
UNAVAILABLE = "The figures took too long to read or the database is away; see Retry-After."
THROTTLED = "The account is over RUNTIME_REQUESTS_PER_MINUTE_PER_ACCOUNT; see Retry-After."


class RuntimeDocumentApi(APIView):
    authentication_classes = [MetricsTokenAuthentication]
    permission_classes = [HasMetricsToken]
    throttle_classes = [RuntimeDocumentThrottle]
    renderer_classes = [JSONRenderer]

    @extend_schema(
        operation_id="runtime_document",
        summary="A pipeline's runtime document: budgets and observed times, for the client",
        tags=["runtime"],
        parameters=[
            OpenApiParameter(
                "If-None-Match",
                str,
                OpenApiParameter.HEADER,
                description="The ETag of the copy held: 304 while it is current.",
            )
        ],
        responses={
            200: RuntimeDocumentOutput,
            304: OpenApiResponse(description="The copy held is current."),
            401: OpenApiResponse(ErrorSerializer, description=UNAUTHENTICATED),
            404: OpenApiResponse(ErrorSerializer, description=NOT_FOUND),
            429: OpenApiResponse(ErrorSerializer, description=THROTTLED),
            503: OpenApiResponse(ErrorSerializer, description=UNAVAILABLE),
        },
    )
    def get(self, request: Request, pipeline_slug: str) -> HttpResponse:
        pipeline = pipeline_for_token(
            token=request_metrics_token(request), pipeline_slug=pipeline_slug
        )
        pipeline_runtime_read(pipeline=pipeline)
        document = runtime_document(pipeline=pipeline)
        held = parse_etags(request.headers.get("If-None-Match", ""))
        if document.etag in held or "*" in held:
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(document.body, content_type="application/json")
        response["ETag"] = document.etag
        response["Cache-Control"] = f"private, max-age={settings.RUNTIME_REFRESH_SECONDS}"
        return response
