"""A saved scenario's link to the what-if page.

The page is the dashboards app's, which registers how its address is built
(``whatif_page_link_register``, in its ``ready``); the API here names no URL of another
app's.
"""

from collections.abc import Callable, Sequence

from apps.pipelines.models import Pipeline
from apps.whatif.changes import change_texts
from apps.whatif.models import SavedScenario

# (pipeline, the changes in their compact form) -> the page's address
PageLink = Callable[[Pipeline, Sequence[str]], str]
_page_link: PageLink | None = None


def whatif_page_link_register(builder: PageLink) -> None:
    global _page_link
    _page_link = builder


def scenario_page_url(*, pipeline: Pipeline, scenario: SavedScenario) -> str:
    """The what-if page showing ``scenario``."""
    if _page_link is None:
        raise RuntimeError("No app has registered the what-if page's address.")
    return _page_link(pipeline, change_texts(scenario.changes))
