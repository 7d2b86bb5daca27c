"""Traces narrowed by what analysis recorded in their search sets (``trace_search``).

Both narrowings add containment tests on ``search_hashes``, which a GIN index answers;
the stage's read buckets, made exact by a look at the trace's sample at the edges.
Each has a loose twin (``*_groups``) for a span store that keeps the search sets: the
groups of elements a trace's set must hold one of each, which those tests then confirm.
"""

from collections.abc import Sequence

from django.db.models import (
    BigIntegerField,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)

from apps.analysis.models import StageSample
from apps.analysis.trace_search import (
    SHARE_STEPS,
    degraded_mark,
    pair_hash,
    ran_mark,
    share_mark,
    wall_above_marks,
)
from apps.core.time import NS_PER_MS
from apps.ingest.models import Trace
from apps.pipelines.models import Stage


def traces_with_attributes(
    traces: QuerySet[Trace], *, team_id: int, pairs: Sequence[tuple[str, str]]
) -> QuerySet[Trace]:
    """The traces with every ``(key, text)`` pair on some span (not necessarily the same
    one); texts compare as ``attribute_text`` makes them."""
    if not pairs:
        return traces
    hashes = [h for (h,) in attribute_groups(team_id, pairs)]
    return traces.filter(search_hashes__contains=hashes)


def traces_by_stage(
    traces: QuerySet[Trace],
    *,
    team_id: int,
    stage: Stage,
    over_budget: bool = False,
    min_critical_percent: int | None = None,
) -> QuerySet[Trace]:
    """The traces that ran ``stage``: over its budget (its wall time above ``budget_ms``
    now), and/or with at least ``min_critical_percent`` % of their end-to-end time spent
    in it on the critical path.

    A trace marked in a bucket wholly past the bound is taken as it is; one marked in
    the bucket that holds the bound is checked on its sample of the stage, one
    primary-key probe per trace at the edge.
    """
    sample = StageSample.objects.filter(
        trace_pk=OuterRef("pk"), stage_id=stage.pk, start_ns=OuterRef("start_ns")
    )
    conditions = []
    if over_budget and stage.budget_ms is not None:
        budget_ns = stage.budget_ms * NS_PER_MS
        edge, beyond = wall_above_marks(team_id=team_id, stage_id=stage.pk, wall_ns=budget_ns)
        traces = traces.alias(stage_over=_one(sample.filter(wall_ns__gt=budget_ns)))
        conditions.append(
            Q(search_hashes__overlap=beyond)
            | Q(search_hashes__contains=[edge]) & Q(stage_over__isnull=False)
        )
    if min_critical_percent is not None:
        # Exactly, in integers: critical · 100 ≥ percent · end-to-end.
        edge_mark, beyond = _share_marks(team_id, stage.pk, min_critical_percent)
        enough = sample.alias(scaled=F("critical_ns") * 100).filter(
            scaled__gte=ExpressionWrapper(
                (OuterRef("end_ns") - OuterRef("start_ns")) * min_critical_percent,
                output_field=BigIntegerField(),
            )
        )
        traces = traces.alias(stage_share=_one(enough))
        conditions.append(
            Q(search_hashes__overlap=beyond)
            | Q(search_hashes__contains=[edge_mark], stage_share__isnull=False)
        )
    if not conditions:
        conditions.append(Q(search_hashes__contains=[ran_mark(team_id, stage.pk)]))
    for condition in conditions:
        traces = traces.filter(condition)
    return traces


def stage_groups(
    *,
    team_id: int,
    stage: Stage,
    over_budget: bool = False,
    min_critical_percent: int | None = None,
) -> list[tuple[int, ...]]:
    """``traces_by_stage`` loosely: its edge buckets without the look at the sample."""
    groups: list[tuple[int, ...]] = []
    if over_budget and stage.budget_ms is not None:
        edge, beyond = wall_above_marks(
            team_id=team_id, stage_id=stage.pk, wall_ns=stage.budget_ms * NS_PER_MS
        )
        groups.append((edge, *beyond))
    if min_critical_percent is not None:
        edge, beyond = _share_marks(team_id, stage.pk, min_critical_percent)
        groups.append((edge, *beyond))
    return groups or [(ran_mark(team_id, stage.pk),)]


def traces_degraded(
    traces: QuerySet[Trace], *, team_id: int, stage: Stage | None = None
) -> QuerySet[Trace]:
    """The traces on which a run-time client recorded a decision, at ``stage`` when
    given (a skipped stage never ran, so this does not ask that it did)."""
    return traces.filter(search_hashes__contains=list(degraded_groups(team_id, stage)[0]))


def degraded_groups(team_id: int, stage: Stage | None = None) -> list[tuple[int, ...]]:
    return [(degraded_mark(team_id, None if stage is None else stage.pk),)]


def attribute_groups(team_id: int, pairs: Sequence[tuple[str, str]]) -> list[tuple[int, ...]]:
    return [(h,) for h in sorted({pair_hash(team_id, key, text) for key, text in pairs})]


def _share_marks(team_id: int, stage_id: int, min_critical_percent: int) -> tuple[int, list[int]]:
    """The mark of the 5 % bucket that holds the share (its traces need a look at their
    sample), and those of the buckets above it."""
    edge = SHARE_STEPS * min_critical_percent // 100
    beyond = [share_mark(team_id, stage_id, b) for b in range(edge + 1, SHARE_STEPS + 1)]
    return share_mark(team_id, stage_id, edge), beyond


def _one(sample: QuerySet[StageSample]) -> Subquery:
    """The sample's trace key when it passes, else null. A scalar subquery is planned as
    a probe per row; PostgreSQL may plan EXISTS as a hash over every sample of the stage."""
    return Subquery(sample.values("trace_pk")[:1], output_field=BigIntegerField())
