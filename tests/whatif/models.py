"""Hand-built traces turned into replay models, for the engine's tests."""

from collections.abc import Sequence

import numpy as np

from apps.analysis.attribution import attribute_trace
from apps.analysis.critical_path import find_root
from apps.analysis.spans import Span, unique_spans
from apps.analysis.stage_inheritance import trace_matches
from apps.analysis.stage_matching import RuleSpec, StageMatcher, StageSpec
from apps.whatif.changes import Change
from apps.whatif.dependency import ModelRows, model_add_trace, stage_index
from apps.whatif.replay import ReplayModel, ReplayResult, replay, replay_model
from apps.whatif.scenario import scenario_compile
from tests.builders.spans import T0, span
from tests.timing import MS


def by_name(*slugs: str, split: tuple[str, str] | None = None) -> StageMatcher:
    """Stage ``slug`` takes the spans named ``slug*``; ``split`` = (ttft, generation)
    stages of the spans named ``llm*``, split at their first token."""
    specs = [
        StageSpec(slug, [RuleSpec(span_name=f"{slug}*")], position)
        for position, slug in enumerate(slugs)
    ]
    if split is not None:
        before, after = split
        specs += [
            StageSpec(before, [RuleSpec(span_name="llm*", portion="until_first_token")], 100),
            StageSpec(after, [RuleSpec(span_name="llm*", portion="after_first_token")], 101),
        ]
    return StageMatcher(specs)


def model_of(traces: Sequence[Sequence[Span]], matcher: StageMatcher) -> ReplayModel:
    slugs = matcher.stage_slugs
    rows = ModelRows(stage_count=len(slugs))
    for key, spans in enumerate(traces):
        by_id = unique_spans(spans)
        root = find_root(by_id)
        matches = trace_matches(by_id, root, matcher)
        model_add_trace(
            rows, key=key, by_id=by_id, root=root, matches=matches, stages=stage_index(slugs)
        )
    return replay_model(rows, slugs)


def replayed(
    model: ReplayModel, *changes: Change, budgets: dict[str, int | None] | None = None
) -> ReplayResult:
    scenario = scenario_compile(changes, stage_slugs=model.stage_slugs, budgets_ms=budgets or {})
    return replay(model, scenario)


def ms_span(
    span_id: int,
    parent: int | None,
    start_ms: float,
    end_ms: float,
    name: str,
    events: Sequence[tuple[str, int]] = (),
) -> Span:
    """A span with times in ms from T0."""
    start, end = T0 + round(start_ms * MS), T0 + round(end_ms * MS)
    return span(span_id, parent, start, end, name=name, events=events)


def assert_replay_reproduces_analysis(
    batch: Sequence[Sequence[Span]], matcher: StageMatcher
) -> None:
    """A replay without changes gives each trace's end-to-end time, stage wall times and
    critical-path total exactly as trace analysis does."""
    model = model_of(batch, matcher)
    result = replayed(model)
    for row, spans in enumerate(batch):
        analysed = attribute_trace(spans, matcher)
        assert result.e2e_ns[row] == analysed.e2e_ns
        for column, slug in enumerate(model.stage_slugs):
            wall = result.wall_ns[row, column]
            if slug in analysed.stages:
                assert wall == analysed.stages[slug].wall_ns
            else:
                assert np.isnan(wall)
        assert result.critical_ns[row].sum() == analysed.e2e_ns


def e2e_ms(result: ReplayResult) -> list[float]:
    return [round(value / MS, 3) for value in result.e2e_ns]


def stage_ms(
    result: ReplayResult, model: ReplayModel, slug: str, *, critical: bool = False
) -> list[float | None]:
    column = model.stage_slugs.index(slug)
    values = result.critical_ns[:, column] if critical else result.wall_ns[:, column]
    return [None if value != value else round(value / MS, 3) for value in values]
