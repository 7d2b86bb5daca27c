"""One page of the trace list: ingestion's traces narrowed by what analysis knows."""

from dataclasses import dataclass

from django.db.models import QuerySet

from apps.analysis.models import StageSample
from apps.analysis.selectors.search import (
    attribute_groups,
    degraded_groups,
    stage_groups,
    traces_by_stage,
    traces_degraded,
    traces_with_attributes,
)
from apps.core.time import NS_PER_MS, ns_to_ms
from apps.dashboards.trace_query import TraceQuery
from apps.ingest.models import Trace
from apps.ingest.selectors import SearchNarrowing, TracePage, TraceSummary, traces_page
from apps.teams.models import Team


@dataclass(frozen=True)
class StageTime:
    """The filtered stage's wall time in one listed trace, against its budget."""

    wall_ms: float
    over: bool | None  # None: the stage has no budget


@dataclass(frozen=True)
class TraceRow:
    item: TraceSummary
    stage_time: StageTime | None  # None: no stage chosen, or no sample of it


@dataclass(frozen=True)
class TraceListPage:
    page: TracePage
    # Trace id (hex) -> the chosen stage's time in it; empty when no stage is chosen.
    stage_times: dict[str, StageTime]

    @property
    def rows(self) -> list[TraceRow]:
        return [TraceRow(item, self.stage_times.get(item.trace_id)) for item in self.page.traces]


def trace_list_page(*, team: Team, query: TraceQuery, limit: int) -> TraceListPage:
    """The page ``query`` asks for, ``limit`` traces at most."""
    page = traces_page(
        team=team,
        filters=query.filters,
        sort=query.sort,
        cursor=query.cursor,
        limit=limit,
        narrow=_search_narrowing(team, query),
    )
    return TraceListPage(page, _stage_times(query, page))


def _search_narrowing(team: Team, query: TraceQuery) -> SearchNarrowing | None:
    """What the query asks of the traces' search sets; None when nothing (only these
    read the search set, whose plan the list chooses itself)."""
    if query.stage is None and not query.attributes and not query.degraded:
        return None
    stage = query.stage
    stage_figures = query.stage_over_budget or query.min_critical_percent is not None
    by_stage = stage is not None and (stage_figures or not query.degraded)

    def rows(traces: QuerySet[Trace]) -> QuerySet[Trace]:
        if query.degraded:
            traces = traces_degraded(traces, team_id=team.pk, stage=stage)
        if by_stage and stage is not None:
            traces = traces_by_stage(
                traces,
                team_id=team.pk,
                stage=stage,
                over_budget=query.stage_over_budget,
                min_critical_percent=query.min_critical_percent,
            )
        return traces_with_attributes(traces, team_id=team.pk, pairs=query.attributes)

    groups = attribute_groups(team.pk, query.attributes)
    if query.degraded:
        groups += degraded_groups(team.pk, stage)
    if by_stage and stage is not None:
        groups += stage_groups(
            team_id=team.pk,
            stage=stage,
            over_budget=query.stage_over_budget,
            min_critical_percent=query.min_critical_percent,
        )
    return SearchNarrowing(rows, tuple(groups))


def _stage_times(query: TraceQuery, page: TracePage) -> dict[str, StageTime]:
    stage = query.stage
    if stage is None or not page.traces:
        return {}
    by_pk = {item.trace.pk: item.trace_id for item in page.traces}
    samples = StageSample.objects.filter(
        stage_id=stage.pk,
        trace_pk__in=list(by_pk),
        # The samples' partition key: the traces' starts find their day partitions.
        start_ns__in=sorted({item.trace.start_ns for item in page.traces}),
    ).values_list("trace_pk", "wall_ns")
    budget = stage.budget_ms
    return {
        by_pk[trace_pk]: StageTime(
            ns_to_ms(wall_ns), None if budget is None else wall_ns > budget * NS_PER_MS
        )
        for trace_pk, wall_ns in samples
    }
