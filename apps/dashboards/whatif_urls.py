"""The what-if page's address: its window, percentile and changes are in the query, so
that a scenario is shared as a link. The one builder of it (the saved scenarios of the
API link here through ``apps.whatif.page_link``)."""

from collections.abc import Sequence
from urllib.parse import urlencode

from django.urls import reverse

from apps.pipelines.models import Pipeline

CHANGE_PARAMETER = "change"


def whatif_page_path(pipeline: Pipeline) -> str:
    return reverse(
        "dashboards:whatif",
        kwargs={"team_slug": pipeline.team.slug, "pipeline_slug": pipeline.slug},
    )


def whatif_page_url(
    pipeline: Pipeline, changes: Sequence[str] = (), extra: Sequence[tuple[str, str]] = ()
) -> str:
    """The page with ``extra`` parameters first (window, percentile), then one ``change``
    parameter per change in its compact form."""
    query = [*extra, *((CHANGE_PARAMETER, text) for text in changes)]
    path = whatif_page_path(pipeline)
    return f"{path}?{urlencode(query)}" if query else path
