"""The budget fit check of a pipeline over the last 7 days."""

from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.views import ApiView
from apps.pipelines.access import pipeline_for_request
from apps.rollups.apis.serializers import FitOutput, fit_data
from apps.rollups.selectors.fit import pipeline_fit_recent
from apps.teams.api_schema import team_schema


class PipelineFitApi(ApiView):
    @team_schema(
        summary="Do the stage budgets fit the end-to-end budget? (last 7 days)",
        description=(
            "Over the pipeline's complete traces of the last 7 days: per stage, the share "
            "of traces over its budget next to the share its percentile allows; the share "
            "of traces where every budgeted stage met its budget but the end-to-end budget "
            "was exceeded (the allocation is inconsistent); and a suggested budget per "
            "stage: its observed percentile plus headroom, with the parts on the critical "
            "path scaled down together until they fit the end-to-end budget minus the "
            "untracked time."
        ),
        responses={200: FitOutput},
        tags=["objectives"],
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        return Response(FitOutput(fit_data(pipeline_fit_recent(pipeline=pipeline))).data)
