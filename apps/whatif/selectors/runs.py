"""Reading saved scenarios."""

from django.db.models import QuerySet

from apps.pipelines.models import Pipeline
from apps.whatif.models import SavedScenario


def scenarios_for_pipeline(*, pipeline: Pipeline) -> QuerySet[SavedScenario]:
    return SavedScenario.objects.filter(pipeline=pipeline).order_by("name")
