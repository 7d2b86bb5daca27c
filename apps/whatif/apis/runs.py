"""Asking what a change would do, and which levers there are; polling a run's answer."""

from typing import Any

from django.core.exceptions import ValidationError
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.schema import error_responses
from apps.core.api.views import ApiView
from apps.core.percentiles import PERCENTILES
from apps.pipelines.access import pipeline_for_request
from apps.pipelines.models import Pipeline
from apps.teams.api_schema import team_schema
from apps.teams.request_team import team_slug_for_request
from apps.whatif.access import whatif_run_for_user
from apps.whatif.apis.serializers import (
    WAIT_NOTE,
    LeversInput,
    LeversOutput,
    RunPendingOutput,
    WhatIfInput,
    WhatIfOutput,
    run_data,
)
from apps.whatif.changes import changes_from_data, changes_from_texts
from apps.whatif.models import RunKind, WhatIfRun
from apps.whatif.params import levers_params, replay_params, stages_by_slug
from apps.whatif.services import WhatIfBusy, whatif_run_request

TAGS = ["what-if"]
POLL_AFTER_S = 2

EXAMPLE_CHANGES = [
    {"stage": "rerank", "op": "remove"},
    {"stage": "history", "op": "parallel", "with": "rewrite"},
    {"stage": "retrieval", "op": "cache", "hit_ratio": 0.4, "hit_ms": 20},
    {"stage": "generation", "op": "scale", "factor": 0.8},
    {"stage": "tool", "op": "cap", "ms": 500},
]


EXAMPLE = OpenApiExample(
    "Five changes over the last 15 minutes",
    value={"window": "15m", "percentile": "p95", "changes": EXAMPLE_CHANGES},
    request_only=True,
)


class RunFailed(exceptions.APIException):
    status_code = 422
    default_code = "failed"


def _requested(pipeline: Pipeline, kind: str, params: dict[str, Any]) -> WhatIfRun:
    try:
        return whatif_run_request(pipeline=pipeline, kind=kind, params=params)
    except WhatIfBusy as exc:
        raise exceptions.Throttled(wait=exc.retry_after_s, detail=str(exc)) from None


def _answer(request: Request, run: WhatIfRun, output: type[serializers.Serializer]) -> Response:
    if run.status == "failed":
        raise RunFailed(run.error or "The computation failed.")
    if run.status != "done" or run.result is None:
        name = "api-whatif-run" if run.kind == RunKind.REPLAY else "api-levers-run"
        poll = reverse(name, kwargs={"pipeline_slug": run.pipeline.slug, "run_id": run.pk})
        team = team_slug_for_request(request)
        data = {
            "run": run.pk,
            "status": run.status,
            "poll": f"{poll}?team={team}",
            "retry_after_s": POLL_AFTER_S,
        }
        response = Response(RunPendingOutput(data).data, status=status.HTTP_202_ACCEPTED)
        response["Retry-After"] = str(POLL_AFTER_S)
        return response
    return Response(output(run_data(run, run.result)).data)


RUN_RESPONSES = {
    202: OpenApiResponse(RunPendingOutput, description="Still computing: poll `poll`."),
}
FAILED_AND_BUSY = error_responses(422, 429)


class PipelineWhatIfApi(ApiView):
    InputSerializer = WhatIfInput

    @team_schema(
        summary="Predict the pipeline's percentiles under changes",
        description=(
            "Replays a reproducible sample of the window's traces (default 2,000) under "
            "the changes, which combine: `scale` a stage by `factor`; `shift` each of its "
            "spans by `ms`; `cache` it (`hit_ratio` of traces, drawn the same way every "
            "time, take `hit_ms`); `parallel`: run it concurrently `with` another stage; "
            "`remove` it; `cap` each of its spans at `ms` or `at: budget`. `before` is the "
            "same replay without changes (it reproduces the observed traces exactly). "
            "Percentiles are exact nearest-rank with 95 % bootstrap intervals. "
            "See docs/whatif.md for the model and its limits. " + WAIT_NOTE
        ),
        request=InputSerializer,
        responses={200: WhatIfOutput, **RUN_RESPONSES, **FAILED_AND_BUSY},
        tags=TAGS,
    )
    @extend_schema(examples=[EXAMPLE])
    def post(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        start, end = serializer.bounds()
        try:
            changes = changes_from_data(data["changes"], stages=stages_by_slug(pipeline=pipeline))
        except ValidationError as exc:
            raise serializers.ValidationError({"changes": exc.messages}) from None
        params = replay_params(
            start=start,
            end=end,
            traces=data["traces"],
            percentile=data["percentile"],
            changes=changes,
        )
        run = _requested(pipeline, RunKind.REPLAY, params)
        return _answer(request, run, WhatIfOutput)


def _lever_parameters() -> list[OpenApiParameter]:
    return [
        OpenApiParameter("window", OpenApiTypes.STR, OpenApiParameter.QUERY,
                         description="How far back from now (default 1h); or give from/to."),
        OpenApiParameter("from", OpenApiTypes.DATETIME, OpenApiParameter.QUERY),
        OpenApiParameter("to", OpenApiTypes.DATETIME, OpenApiParameter.QUERY),
        OpenApiParameter("percentile", OpenApiTypes.STR, OpenApiParameter.QUERY,
                         enum=list(PERCENTILES), description="Default p95."),
        OpenApiParameter("traces", OpenApiTypes.INT, OpenApiParameter.QUERY,
                         description="Traces to replay, 100 to 20,000 (default 2,000)."),
        OpenApiParameter("hit_ratio", OpenApiTypes.NUMBER, OpenApiParameter.QUERY,
                         description="For cache levers: the share of slow requests made fast "
                         "(default 0.5)."),
        OpenApiParameter("change", OpenApiTypes.STR, OpenApiParameter.QUERY, many=True,
                         description="A change of the scenario being tried, in the page's "
                         "form (`rerank:remove`, `retrieval:cache:0.4:20`), repeated for "
                         "each, at most 20: the levers are found on top of them."),
    ]  # fmt: skip


class PipelineLeversApi(ApiView):
    InputSerializer = LeversInput

    @team_schema(
        summary="Find the levers that would move the end-to-end percentile most",
        description=(
            "Per stage, the saving at the percentile if each of its spans were 10 % or "
            "100 ms faster (which stage's milliseconds reach the slow requests); pairs of "
            "stages that ran one after the other, with the saving if they ran "
            "concurrently; stages whose times fall in two groups (a cache at work, or "
            "missing), with the saving if more requests took the fast way. Each lever "
            "carries the `changes` to replay it with. Given a scenario (`change`), savings "
            "are measured from the scenario's percentile, and no lever touches a stage it "
            "removed, a pair it runs concurrently or a stage it caches. " + WAIT_NOTE
        ),
        parameters=_lever_parameters(),
        responses={200: LeversOutput, **RUN_RESPONSES, **FAILED_AND_BUSY},
        tags=TAGS,
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        serializer = self.InputSerializer(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        start, end = serializer.bounds()
        try:
            changes = changes_from_texts(
                request.query_params.getlist("change"), stages=stages_by_slug(pipeline=pipeline)
            )
        except ValidationError as exc:
            raise serializers.ValidationError({"change": exc.messages}) from None
        params = levers_params(
            start=start,
            end=end,
            traces=data["traces"],
            percentile=data["percentile"],
            hit_ratio=data["hit_ratio"],
            changes=changes,
        )
        run = _requested(pipeline, RunKind.LEVERS, params)
        return _answer(request, run, LeversOutput)


def _run(request: Request, pipeline_slug: str, run_id: int, kind: str) -> WhatIfRun:
    pipeline = pipeline_for_request(request, pipeline_slug)
    run = whatif_run_for_user(
        user=request.user, team_slug=team_slug_for_request(request), pipeline=pipeline,
        run_id=run_id,
    )  # fmt: skip
    if run.kind != kind:
        raise exceptions.NotFound()
    return run


class WhatIfRunApi(ApiView):
    @extend_schema(operation_id="v1_pipelines_whatif_run_retrieve")
    @team_schema(
        summary="A what-if run's answer, once computed",
        description="200 with the answer when done, 202 while a worker computes it.",
        responses={200: WhatIfOutput, **RUN_RESPONSES, **error_responses(422)},
        tags=TAGS,
    )
    def get(self, request: Request, pipeline_slug: str, run_id: int) -> Response:
        run = _run(request, pipeline_slug, run_id, RunKind.REPLAY)
        return _answer(request, run, WhatIfOutput)


class LeversRunApi(ApiView):
    @extend_schema(operation_id="v1_pipelines_levers_run_retrieve")
    @team_schema(
        summary="A lever search's answer, once computed",
        description="200 with the answer when done, 202 while a worker computes it.",
        responses={200: LeversOutput, **RUN_RESPONSES, **error_responses(422)},
        tags=TAGS,
    )
    def get(self, request: Request, pipeline_slug: str, run_id: int) -> Response:
        run = _run(request, pipeline_slug, run_id, RunKind.LEVERS)
        return _answer(request, run, LeversOutput)
