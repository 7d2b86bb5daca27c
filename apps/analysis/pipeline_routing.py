"""Which pipeline a trace belongs to, decided on its root span."""

from dataclasses import dataclass

from apps.analysis.spans import Span
from apps.analysis.stage_matching import (
    StageMatcher,
    attribute_text,
    no_stage_specs_from_pipeline,
    stage_specs_from_pipeline,
)
from apps.pipelines.models import Pipeline
from apps.pipelines.name_patterns import GLOB, NameTest, name_test


@dataclass(frozen=True)
class CompiledPipeline:
    pipeline: Pipeline
    service: str
    root_name: NameTest | None
    attributes: tuple[tuple[str, str | None], ...]
    matcher: StageMatcher
    stage_ids: dict[str, int]

    @property
    def specificity(self) -> int:
        return bool(self.service) + bool(self.root_name) + len(self.attributes)

    def matches(self, root: Span) -> bool:
        if self.service and root.service != self.service:
            return False
        if self.root_name is not None and not self.root_name(root.name):
            return False
        for key, expected in self.attributes:
            if key not in root.attributes or attribute_text(root.attributes[key]) != expected:
                return False
        return True


def compile_pipeline(pipeline: Pipeline) -> CompiledPipeline:
    """Compile a pipeline loaded by ``with_rules``."""
    return CompiledPipeline(
        pipeline=pipeline,
        service=pipeline.match_service,
        root_name=name_test(pattern=pipeline.match_root_span, kind=GLOB)
        if pipeline.match_root_span
        else None,
        attributes=tuple(
            (key, attribute_text(value)) for key, value in sorted(pipeline.match_attributes.items())
        ),
        matcher=StageMatcher(
            stage_specs_from_pipeline(pipeline), no_stage_specs_from_pipeline(pipeline)
        ),
        stage_ids={stage.slug: stage.id for stage in pipeline.stages.all()},
    )


class PipelineRouter:
    """A team's pipelines, most specific first: the first whose root match holds wins.

    Specificity is the number of conditions set (service, root span name,
    attributes), then the slug, so a catch-all pipeline never hides a precise one.
    """

    def __init__(self, pipelines: list[Pipeline]) -> None:
        compiled = [compile_pipeline(p) for p in pipelines]
        self.pipelines = sorted(compiled, key=lambda c: (-c.specificity, c.pipeline.slug))

    def route(self, root: Span) -> CompiledPipeline | None:
        for candidate in self.pipelines:
            if candidate.matches(root):
                return candidate
        return None
