"""Recomputing a pipeline's recent traces with its rules of now, and reading how far it got."""

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.analysis.access import recompute_for_pipeline
from apps.analysis.models import Recompute, RecomputeStatus
from apps.analysis.selectors.recompute import (
    earlier_rules_until,
    recompute_latest,
    recompute_progress,
)
from apps.analysis.services.recompute import (
    RecomputeBusy,
    recompute_hours_offered,
    recompute_request,
)
from apps.core.api.schema import error_responses
from apps.core.api.views import ApiView
from apps.pipelines.access import pipeline_for_request
from apps.pipelines.models import Pipeline
from apps.teams.api_schema import team_schema
from apps.teams.request_team import request_user, team_slug_for_request

TAGS = ["recompute"]
POLL_AFTER_S = 2
ABOUT = (
    "A recompute analyses the pipeline's traces that started in the last `hours` again, "
    "from their stored spans, with the pipeline's stages and rules as they are now: their "
    "stage samples are replaced and the rollups of the window rebuilt, so percentiles, "
    "critical-path shares and the fit check follow. Violations and alerts of past "
    "evaluation windows are not rewritten. One recompute per account is queued or running "
    "at a time. See docs/recompute.md."
)


class RecomputeConflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "recompute_running"


class RecomputeRunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RecomputeStatus.choices)
    hours = serializers.IntegerField(help_text="How far back, as asked.")
    window_start = serializers.DateTimeField(
        help_text="Traces that started from here… (later than asked when older spans are gone)."
    )
    window_end = serializers.DateTimeField(help_text="…until here: when it was asked for.")
    window_cut = serializers.BooleanField(
        help_text="The window starts later than asked: older spans are no longer stored."
    )
    total = serializers.IntegerField(help_text="Traces in the window when it started.")
    done = serializers.IntegerField(help_text="Traces analysed again.")
    skipped = serializers.IntegerField(
        help_text="Traces that got new spans meanwhile: they are analysed when they settle."
    )
    expired = serializers.IntegerField(help_text="Traces whose spans are no longer stored.")
    failed = serializers.IntegerField(help_text="Traces whose analysis failed: quarantined.")
    percent = serializers.IntegerField(help_text="Share of the window's traces handled.")
    rollup_buckets_pending = serializers.IntegerField(
        help_text="The pipeline's rollup buckets still to be rewritten (up to 10,000)."
    )
    requested_by = serializers.CharField(allow_null=True)
    requested_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    poll = serializers.CharField(help_text="This run's own URL.")


class RecomputeStateOutput(serializers.Serializer):
    rules_changed_at = serializers.DateTimeField(
        allow_null=True, help_text="When the pipeline's root match, stage order or rules changed."
    )
    earlier_rules_until = serializers.DateTimeField(
        allow_null=True,
        help_text="Traces that started before this were analysed with earlier rules.",
    )
    hours_offered = serializers.ListField(child=serializers.IntegerField())
    run = RecomputeRunOutput(allow_null=True, help_text="The latest recompute, if any.")


class RecomputeStartOutput(RecomputeRunOutput):
    joined = serializers.BooleanField(
        help_text="The same recompute was already running: this request joined it."
    )


def _run_data(request: Request, run: Recompute) -> dict[str, Any]:
    progress = recompute_progress(run=run)
    poll = reverse(
        "api-recompute-run", kwargs={"pipeline_slug": run.pipeline.slug, "run_id": run.pk}
    )
    return {
        "id": run.pk,
        "status": run.status,
        "hours": run.hours,
        "window_start": run.window_start,
        "window_end": run.window_end,
        "window_cut": progress.window_cut,
        "total": run.total,
        "done": run.done,
        "skipped": run.skipped,
        "expired": run.expired,
        "failed": run.failed,
        "percent": progress.percent,
        "rollup_buckets_pending": progress.rollups_pending,
        "requested_by": run.requested_by.username if run.requested_by else None,
        "requested_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "error": run.error,
        "poll": f"{poll}?team={team_slug_for_request(request)}",
    }


def _state(request: Request, pipeline: Pipeline) -> dict[str, Any]:
    run = recompute_latest(pipeline=pipeline)
    return {
        "rules_changed_at": pipeline.rules_changed_at,
        "earlier_rules_until": earlier_rules_until(pipeline=pipeline),
        "hours_offered": recompute_hours_offered(),
        "run": _run_data(request, run) if run else None,
    }


class RecomputeStateApi(ApiView):
    @team_schema(
        summary="The pipeline's latest recompute and whether its figures predate its rules",
        description=ABOUT,
        responses={200: RecomputeStateOutput},
        tags=TAGS,
    )
    @extend_schema(operation_id="v1_pipelines_recompute_state")
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        return Response(RecomputeStateOutput(_state(request, pipeline)).data)


class RecomputeStartApi(ApiView):
    class InputSerializer(serializers.Serializer):
        hours = serializers.IntegerField(
            help_text="How far back: one of `hours_offered` (capped by RECOMPUTE_MAX_HOURS)."
        )

        class Meta:
            ref_name = "RecomputeInput"

    @team_schema(
        summary="Recompute the pipeline's last hours with its rules of now",
        description=(
            ABOUT + " Answers 202 at once with the run: poll `poll` for its progress. "
            "Asking again while this pipeline's recompute of as many hours or more runs "
            "joins it (`joined`); any other recompute of the account in flight is a 409."
        ),
        request=InputSerializer,
        responses={
            202: RecomputeStartOutput,
            **error_responses(409),
        },
        write=True,
        tags=TAGS,
    )
    @extend_schema(
        operation_id="v1_pipelines_recompute_start",
        examples=[OpenApiExample("The last 6 hours", value={"hours": 6})],
    )
    def post(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            requested = recompute_request(
                pipeline=pipeline,
                hours=serializer.validated_data["hours"],
                user=request_user(request),
            )
        except RecomputeBusy as exc:
            raise RecomputeConflict(str(exc)) from None
        data = {**_run_data(request, requested.run), "joined": requested.joined}
        response = Response(RecomputeStartOutput(data).data, status=status.HTTP_202_ACCEPTED)
        response["Location"] = data["poll"]
        response["Retry-After"] = str(POLL_AFTER_S)
        return response


class RecomputeRunApi(ApiView):
    @team_schema(
        summary="One recompute of the pipeline: its progress",
        description=ABOUT,
        responses={200: RecomputeRunOutput},
        tags=TAGS,
    )
    @extend_schema(operation_id="v1_pipelines_recompute_run")
    def get(self, request: Request, pipeline_slug: str, run_id: int) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        run = recompute_for_pipeline(pipeline=pipeline, run_id=run_id)
        return Response(RecomputeRunOutput(_run_data(request, run)).data)
