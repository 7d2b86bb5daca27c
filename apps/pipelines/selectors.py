from dataclasses import dataclass, field

from django.db.models import BooleanField, Case, Count, F, Prefetch, Q, QuerySet, When

from apps.pipelines.models import ENGINE_PORTIONS, NoStageRule, Pipeline, SpanRule, Stage
from apps.teams.models import Team


def with_rules(pipelines: QuerySet[Pipeline]) -> QuerySet[Pipeline]:
    """The pipelines with what span matching reads loaded in order: stages, their rules,
    and the no-stage rules (four queries for any number of pipelines)."""
    return pipelines.prefetch_related(
        Prefetch(
            "stages",
            queryset=Stage.objects.order_by("position", "id").prefetch_related(
                Prefetch("rules", queryset=SpanRule.objects.order_by("position", "id"))
            ),
        ),
        Prefetch("no_stage_rules", queryset=NoStageRule.objects.order_by("position", "id")),
    )


def pipelines_for_team(*, team: Team) -> QuerySet[Pipeline]:
    return Pipeline.objects.filter(team=team).annotate(stage_count=Count("stages")).order_by("name")


def pipeline_with_stages(*, pipeline: Pipeline) -> Pipeline:
    """The pipeline with its stages, their rules and its no-stage rules loaded in order."""
    return with_rules(Pipeline.objects.all()).get(pk=pipeline.pk)


def stages_for_pipeline(*, pipeline: Pipeline) -> QuerySet[Stage]:
    """The pipeline's stages in order, each with its rules loaded in order."""
    return (
        Stage.objects.filter(pipeline=pipeline)
        .order_by("position", "id")
        .prefetch_related(Prefetch("rules", queryset=SpanRule.objects.order_by("position", "id")))
    )


def span_rules_for_stage(*, stage: Stage) -> QuerySet[SpanRule]:
    return SpanRule.objects.filter(stage=stage).order_by("position", "id")


def no_stage_rules_for_pipeline(*, pipeline: Pipeline) -> QuerySet[NoStageRule]:
    return NoStageRule.objects.filter(pipeline=pipeline).order_by("position", "id")


@dataclass(frozen=True)
class AllocationSegment:
    stage: Stage
    budget_ms: int
    share: float  # of the end-to-end budget, 0..1 (may sum past 1)
    same_percentile: bool
    index: int = 0  # the stage's place among the pipeline's stages, for its colour


@dataclass(frozen=True)
class Allocation:
    percentile: str | None
    e2e_ms: int | None
    allocated_ms: int
    segments: list[AllocationSegment]
    unbudgeted: list[Stage]
    # Stages within another stage's time (``Stage.engine_part``): not allocated again.
    within: list[Stage] = field(default_factory=list)

    @property
    def over(self) -> bool:
        return self.e2e_ms is not None and self.allocated_ms > self.e2e_ms

    @property
    def allocated_share(self) -> float:
        return self.allocated_ms / self.e2e_ms if self.e2e_ms else 0.0

    @property
    def over_ms(self) -> int:
        """How much more the stages were given than the end-to-end budget."""
        return max(0, self.allocated_ms - self.e2e_ms) if self.e2e_ms is not None else 0


def stages_marking_engine_parts(*, pipeline: Pipeline) -> list[tuple[Stage, bool]]:
    """The pipeline's stages in order, each with ``Stage.engine_part`` (whether it lies
    within an LLM call's stages) read in the same statement."""
    stages = (
        Stage.objects.filter(pipeline=pipeline)
        .order_by("position", "id")
        .annotate(
            rule_count=Count("rules"),
            engine_rule_count=Count("rules", filter=Q(rules__portion__in=ENGINE_PORTIONS)),
        )
        .annotate(
            is_engine_part=Case(
                When(rule_count__gt=0, rule_count=F("engine_rule_count"), then=True),
                default=False,
                output_field=BooleanField(),
            )
        )
    )
    return [(stage, stage.is_engine_part) for stage in stages]


def pipeline_allocation(*, pipeline: Pipeline) -> Allocation:
    """Stage budgets laid against the end-to-end budget, for the allocation bar.

    Only a first look: percentiles of serial stages do not add up, so the real
    check comes from traces (the budget fit check).
    """
    headline = pipeline.headline_budget
    percentile, e2e = headline if headline else (None, None)
    marked = stages_marking_engine_parts(pipeline=pipeline)
    every = [stage for stage, _ in marked]
    within = {stage.pk for stage, part in marked if part}
    stages = [stage for stage in every if stage.pk not in within]
    segments = [
        AllocationSegment(
            stage=stage,
            budget_ms=stage.budget_ms,
            share=(stage.budget_ms / e2e) if e2e else 0.0,
            same_percentile=stage.budget_percentile == percentile,
            index=index,
        )
        # The index among all the pipeline's stages: the colour the other charts give it.
        for index, stage in enumerate(every)
        if stage.budget_ms and stage.pk not in within
    ]
    return Allocation(
        percentile=percentile,
        e2e_ms=e2e,
        allocated_ms=sum(s.budget_ms for s in segments),
        segments=segments,
        unbudgeted=[stage for stage in stages if not stage.budget_ms],
        within=[stage for stage in every if stage.pk in within],
    )
