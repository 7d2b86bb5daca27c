"""The what-if page's address for a scenario: its changes in the query, so it can be shared."""

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from apps.pipelines.models import Pipeline
from apps.whatif.changes import Change
from apps.whatif.models import SavedScenario

CHANGE_PARAMETER = "change"


def change_texts(changes: Sequence[dict[str, Any]]) -> list[str]:
    """API-form changes in the page's compact form."""
    return [_change(data).as_text() for data in changes]


def _change(data: dict[str, Any]) -> Change:
    cap_at_budget = data.get("op") == "cap" and data.get("at") == "budget"
    return Change(
        stage=data["stage"],
        op=data["op"],
        factor=data.get("factor"),
        ms=None if cap_at_budget else data.get("ms"),
        hit_ratio=data.get("hit_ratio"),
        hit_ms=data.get("hit_ms"),
        with_stage=data.get("with"),
    )


def whatif_page_url(
    *,
    pipeline: Pipeline,
    scenario: SavedScenario | None = None,
    changes: Sequence[dict[str, Any]] = (),
    extra: Sequence[tuple[str, str]] = (),
) -> str:
    path = reverse(
        "dashboards:whatif",
        kwargs={"team_slug": pipeline.team.slug, "pipeline_slug": pipeline.slug},
    )
    chosen = scenario.changes if scenario is not None else changes
    query = [*extra, *((CHANGE_PARAMETER, text) for text in change_texts(chosen))]
    return f"{path}?{urlencode(query)}" if query else path
