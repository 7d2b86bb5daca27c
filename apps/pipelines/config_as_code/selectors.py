from django.db.models import QuerySet

from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import with_rules
from apps.teams.models import Team


def pipelines_for_config(*, team: Team) -> QuerySet[Pipeline]:
    """The team's pipelines with stages, their rules and the no-stage rules in order, as
    configuration as code reads them."""
    return with_rules(Pipeline.objects.filter(team=team)).order_by("slug")
