"""The what-if page composed: the scenario from its URL, its runs, and the figures to draw."""

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from apps.core.percentiles import PERCENTILES
from apps.dashboards.ranges import WHATIF_WINDOWS
from apps.dashboards.whatif_charts import distribution_chart, stage_bars
from apps.dashboards.whatif_urls import CHANGE_PARAMETER, whatif_page_path, whatif_page_url
from apps.pipelines.models import Pipeline, Stage
from apps.whatif.changes import MAX_CHANGES, Change, change_from_text, change_texts
from apps.whatif.models import WhatIfRun


@dataclass
class PageScenario:
    """What the URL asks: a window, a percentile, and the changes that still apply."""

    pipeline: Pipeline
    window: str
    percentile: str
    changes: list[Change] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def query(self, *, window: str | None = None, percentile: str | None = None,
              changes: list[Change] | None = None) -> list[tuple[str, str]]:  # fmt: skip
        chosen = self.changes if changes is None else changes
        return [("window", window or self.window), ("p", percentile or self.percentile),
                *((CHANGE_PARAMETER, change.as_text()) for change in chosen)]  # fmt: skip

    def url(self, query: list[tuple[str, str]]) -> str:
        return whatif_page_url(self.pipeline, extra=query)

    @property
    def canonical(self) -> str:
        return self.url(self.query())


def scenario_from_texts(
    *, pipeline: Pipeline, window: str, percentile: str, texts: list[str], stages: list[Stage]
) -> PageScenario:
    by_slug = {stage.slug: stage for stage in stages}
    scenario = PageScenario(pipeline, window, percentile)
    for number, text in enumerate(texts[:MAX_CHANGES], start=1):
        try:
            scenario.changes.append(
                change_from_text(text, stages=by_slug, where=f"Change {number}")
            )
        except ValidationError as exc:
            scenario.errors.extend(exc.messages)
    return scenario


def _run_ids(replay: WhatIfRun | None, levers: WhatIfRun | None) -> list[tuple[str, str]]:
    ids = [("run", replay), ("levers_run", levers)]
    return [(name, str(run.pk)) for name, run in ids if run is not None]


def _choices(scenario: PageScenario) -> dict[str, list[tuple[Any, ...]]]:
    """Links that change the window or the percentile and keep the changes."""
    windows = [
        (key, window.last, scenario.url(scenario.query(window=key)), key == scenario.window)
        for key, window in WHATIF_WINDOWS.items()
    ]
    percentiles = [
        (p, scenario.url(scenario.query(percentile=p)), p == scenario.percentile)
        for p in PERCENTILES
    ]
    return {"windows": windows, "percentiles": percentiles}


def whatif_page(
    *,
    scenario: PageScenario,
    replay: WhatIfRun | None,
    levers: WhatIfRun | None,
) -> dict[str, Any]:
    """The page's context for its scenario and runs (None: refused as too many at once)."""
    pipeline, percentile = scenario.pipeline, scenario.percentile
    base = [("window", scenario.window), ("p", percentile)]
    context: dict[str, Any] = {
        "window": scenario.window,
        "window_label": WHATIF_WINDOWS[scenario.window].last,  # the form let only these through
        "percentile": percentile,
        "changes": scenario.changes,
        "change_texts": [change.as_text() for change in scenario.changes],
        "errors": scenario.errors,
        "base_url": whatif_page_path(pipeline),
        "page_url": scenario.canonical,
        "replay": replay,
        "levers": levers,
        "pending": any(run is not None and not run.is_finished for run in (replay, levers)),
        "poll_url": scenario.url(
            [*scenario.query(), *_run_ids(replay, levers)]
        ),
        "choices": _choices(scenario),
        "removals": [
            (change, scenario.url(scenario.query(
                changes=[other for other in scenario.changes if other is not change])))
            for change in scenario.changes
        ],
        "result": None,
        "lever_result": None,
    }  # fmt: skip
    if replay is not None and replay.status == "done" and replay.result:
        result = replay.result
        headline = result["headline"]
        context["result"] = result
        context["replay_traces"] = result["traces"]
        context["bars"] = stage_bars(result, percentile)
        context["distribution"] = distribution_chart(
            result["distribution"],
            lines=[
                (f"{percentile} now", headline["before_ms"], "mark"),
                (f"{percentile} after", headline["after_ms"], "mark after"),
                ("budget", (pipeline.budget or {}).get(percentile), "budget-line"),
            ],
        )
    if levers is not None and levers.status == "done" and levers.result:
        found = levers.result

        # A lever is found on top of the scenario: trying it keeps the scenario's changes.
        current = [change.as_data() for change in scenario.changes]

        def tried(changes: list[dict[str, Any]]) -> str:
            return whatif_page_url(pipeline, change_texts([*current, *changes]), extra=base)

        context["lever_result"] = found
        context["lever_rows"] = [
            {**lever, "try": tried(lever["changes"])} for lever in found["levers"]
        ]
        context["advice_rows"] = [
            {**advice, "try": tried(advice["changes"])} for advice in found.get("advice", [])
        ]
        context["sensitivity"] = [
            {
                **row,
                "try_10pct": tried(row["changes_10pct"]),
                "try_100ms": tried(row["changes_100ms"]),
            }
            for row in found["sensitivity"]
        ]
    return context
