"""Access to recomputes: through their pipeline, which its access helper found for the user.

Anyone in the team reads a recompute's progress; starting one is for writers
(``pipeline_for_user(..., write=True)``). Another pipeline's run is a 404.
"""

from django.shortcuts import get_object_or_404

from apps.analysis.models import Recompute
from apps.pipelines.models import Pipeline


def recompute_for_pipeline(*, pipeline: Pipeline, run_id: int) -> Recompute:
    return get_object_or_404(
        Recompute.objects.select_related("pipeline__team", "requested_by"),
        pipeline=pipeline,
        pk=run_id,
    )
