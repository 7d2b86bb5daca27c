"""One trace taken apart: its spans as a tree, the critical path and the stage breakdown.

The breakdown is computed from the stored spans with the pipeline's current stages
and rules, so it shows what the trace would count for now; when the spans have
aged out, or weigh more than ``TRACE_VIEW_MAX_BYTES`` as read (skeletons and the
attributes the rules compare, see ``span_projection``), the stage samples written at
finalization stand in for it.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from apps.analysis.attribution import ChargedSegment, attribute_trace
from apps.analysis.critical_path import children_by_parent
from apps.analysis.models import StageSample
from apps.analysis.pipeline_routing import compile_pipeline
from apps.analysis.span_projection import span_projection
from apps.analysis.spans import Span, unique_spans
from apps.analysis.stage_matching import SpanMatch, StageMatcher
from apps.analysis.stage_reasons import RuleLabel, StageReason, rule_labels, stage_reason
from apps.analysis.stored_spans import spans_read
from apps.core.figures import format_size
from apps.core.isolation import failure_reason, is_transient
from apps.core.time import NS_PER_MS, ns_to_ms
from apps.ingest.models import StatusCode, Trace
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.selectors import pipeline_with_stages

MAX_WATERFALL_SPANS = 2000


@dataclass(frozen=True)
class SpanPart:
    start_ns: int
    end_ns: int
    stage: str | None


@dataclass(frozen=True)
class WaterfallRow:
    span: Span
    depth: int
    status: str
    status_message: str
    parts: tuple[SpanPart, ...]
    critical: tuple[ChargedSegment, ...]
    reason: StageReason  # where its time goes, and why

    @property
    def span_id(self) -> str:
        return self.span.span_id

    @property
    def critical_ns(self) -> int:
        return sum(segment.duration_ns for segment in self.critical)


@dataclass(frozen=True)
class StageBreakdown:
    stage: Stage
    index: int  # position among the pipeline's stages, for a stable colour
    wall_ns: int
    critical_ns: int
    span_count: int
    error: bool
    e2e_ns: int

    @property
    def wall_ms(self) -> float:
        return ns_to_ms(self.wall_ns)

    @property
    def critical_ms(self) -> float:
        return ns_to_ms(self.critical_ns)

    @property
    def share(self) -> float:
        return self.critical_ns / self.e2e_ns if self.e2e_ns else 0.0

    @property
    def share_percent(self) -> float:
        return round(self.share * 100, 1)

    @property
    def budget_ms(self) -> int | None:
        return self.stage.budget_ms

    @property
    def matched(self) -> bool:
        """A span (or part of one) of this trace is in the stage."""
        return self.span_count > 0

    @property
    def over(self) -> bool | None:
        """Whether this trace's wall time in the stage exceeds the stage budget; None: no
        budget, or no span of the trace in the stage (nothing to judge)."""
        if self.stage.budget_ms is None or not self.matched:
            return None
        return self.wall_ns > self.stage.budget_ms * NS_PER_MS


@dataclass(frozen=True)
class TraceAnalysis:
    trace: Trace
    pipeline: Pipeline | None
    e2e_ns: int
    root_span_id: str | None
    root_start_ns: int
    window_start_ns: int
    window_end_ns: int
    rows: list[WaterfallRow]
    span_total: int
    stages: list[StageBreakdown]
    untracked_critical_ns: int
    segments: tuple[ChargedSegment, ...]
    from_spans: bool  # False: spans aged out, the breakdown comes from stage samples
    # Why the stored spans could not be analyzed (the breakdown then comes from samples).
    failure: str = ""

    @property
    def truncated(self) -> bool:
        return self.span_total > len(self.rows)

    @property
    def critical_sum_ns(self) -> int:
        return sum(stage.critical_ns for stage in self.stages) + self.untracked_critical_ns

    @property
    def adds_up(self) -> bool:
        return self.critical_sum_ns == self.e2e_ns

    @property
    def stage_index(self) -> dict[str, int]:
        return {breakdown.stage.slug: breakdown.index for breakdown in self.stages}

    @property
    def stage_names(self) -> dict[str, str]:
        return {breakdown.stage.slug: breakdown.stage.name for breakdown in self.stages}


def _tree_order(by_id: dict[str, Span], root: Span) -> list[tuple[Span, int]]:
    """Depth-first from the root, children by start; spans the walk misses (parent cycles) last."""
    children = children_by_parent(by_id, root)
    ordered: list[tuple[Span, int]] = []
    seen: set[str] = set()
    stack = [(root, 0)]
    while stack:
        span, depth = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        ordered.append((span, depth))
        kids = sorted(children.get(span.span_id, ()), key=lambda s: (s.start_ns, s.span_id))
        stack.extend((kid, depth + 1) for kid in reversed(kids))
    stray = sorted((s for s in by_id.values() if s.span_id not in seen), key=lambda s: s.start_ns)
    ordered.extend((span, 1) for span in stray)
    return ordered


def _parts(span: Span, match: SpanMatch) -> tuple[SpanPart, ...]:
    return tuple(
        SpanPart(start, end, stage) for start, end, stage in match.parts(span) if end >= start
    )


@dataclass(frozen=True)
class _Compiled:
    matcher: StageMatcher
    stages: list[Stage]
    labels: tuple[RuleLabel, ...]  # the matcher's rules as the editor lists them


def _compiled(pipeline: Pipeline | None) -> _Compiled:
    if pipeline is None:
        return _Compiled(StageMatcher([]), [], ())
    loaded = pipeline_with_stages(pipeline=pipeline)
    return _Compiled(
        compile_pipeline(loaded).matcher, list(loaded.stages.all()), rule_labels(loaded)
    )


def _breakdown_from_samples(trace: Trace, stages: list[Stage], e2e_ns: int) -> list[StageBreakdown]:
    samples = {sample.stage_id: sample for sample in StageSample.objects.filter(trace_pk=trace.pk)}
    return [
        StageBreakdown(
            stage=stage,
            index=index,
            wall_ns=samples[stage.pk].wall_ns,
            critical_ns=samples[stage.pk].critical_ns,
            span_count=samples[stage.pk].span_count,
            error=samples[stage.pk].error,
            e2e_ns=e2e_ns,
        )
        for index, stage in enumerate(stages)
        if stage.pk in samples
    ]


def _from_samples(trace: Trace, stages: list[Stage], *, failure: str = "") -> TraceAnalysis:
    """What the last analysis stored, for a trace whose spans are gone or unreadable."""
    e2e = trace.duration_ns or 0
    return TraceAnalysis(
        trace=trace,
        pipeline=trace.pipeline,
        e2e_ns=e2e,
        root_span_id=None,
        root_start_ns=trace.start_ns or 0,
        window_start_ns=trace.start_ns or 0,
        window_end_ns=(trace.start_ns or 0) + max(e2e, 1),
        rows=[],
        span_total=0,
        stages=_breakdown_from_samples(trace, stages, e2e),
        untracked_critical_ns=trace.untracked_critical_ns,
        segments=(),
        from_spans=False,
        failure=failure,
    )


def _too_large(budget: int) -> str:
    return (
        f"its spans' names and rule attributes alone weigh more than {format_size(budget)}, "
        "more than a page reads"
    )


def trace_analysis(*, trace: Trace, span_limit: int = MAX_WATERFALL_SPANS) -> TraceAnalysis:
    """The waterfall (at most ``span_limit`` rows), critical path and breakdown of one trace.

    Spans that analysis cannot read (the kind a finalization pass quarantines) give the
    stored figures and the reason instead of an error: the page of a trace always answers.
    """
    compiled = _compiled(trace.pipeline)
    try:
        # In a savepoint of its own: after a statement that fails (a damaged row, a
        # statement timeout) the stored figures are still read.
        with transaction.atomic():
            return _from_spans(trace, compiled, span_limit)
    except Exception as exc:
        if is_transient(exc):
            raise
        return _from_samples(trace, compiled.stages, failure=failure_reason(exc))


def _from_spans(trace: Trace, compiled: _Compiled, span_limit: int) -> TraceAnalysis:
    pipeline = trace.pipeline
    matcher, stages = compiled.matcher, compiled.stages
    # Skeletons, and only the attributes and events the rules read: never a span's whole
    # attributes, which may weigh a megabyte each.
    budget = settings.TRACE_VIEW_MAX_BYTES
    read = spans_read([trace], projection=span_projection(matcher.rules), max_bytes=budget)
    if read.left_out_from is not None:
        return _from_samples(trace, stages, failure=_too_large(budget))
    by_id = unique_spans(read_span.span for read_span in read.spans)
    if not by_id:
        return _from_samples(trace, stages)
    # The status of each span kept (a span stored twice keeps one copy).
    stored = {r.span.span_id: r for r in read.spans if by_id[r.span.span_id] is r.span}

    attribution = attribute_trace(by_id.values(), matcher)
    root = by_id[attribution.root_span_id]
    segments_by_span: dict[str, list[ChargedSegment]] = {}
    for segment in attribution.segments:
        segments_by_span.setdefault(segment.span_id, []).append(segment)

    # Once, not per span: the enum builds its list of values anew at every access.
    status_labels = dict(StatusCode.choices)
    waterfall = []
    matches = attribution.matches
    for span, depth in _tree_order(by_id, root)[:span_limit]:
        row = stored[span.span_id]
        match = matches[span.span_id]
        reason = stage_reason(
            span, match, matcher=matcher, labels=compiled.labels, by_id=by_id, matches=matches
        )
        waterfall.append(
            WaterfallRow(
                span=span,
                depth=depth,
                status=str(status_labels.get(row.status, "unset")),
                status_message=row.status_message,
                parts=_parts(span, match),
                critical=tuple(segments_by_span.get(span.span_id, ())),
                reason=reason,
            )
        )
    start = min(span.start_ns for span in by_id.values())
    end = max(span.stop_ns for span in by_id.values())
    breakdown = [
        StageBreakdown(
            stage=stage,
            index=index,
            wall_ns=result.wall_ns if result else 0,
            critical_ns=result.critical_ns if result else 0,
            span_count=result.span_count if result else 0,
            error=result.error if result else False,
            e2e_ns=attribution.e2e_ns,
        )
        for index, stage in enumerate(stages)
        for result in [attribution.stages.get(stage.slug)]
    ]
    return TraceAnalysis(
        trace=trace,
        pipeline=pipeline,
        e2e_ns=attribution.e2e_ns,
        root_span_id=root.span_id,
        root_start_ns=root.start_ns,
        window_start_ns=start,
        window_end_ns=max(end, start + 1),
        rows=waterfall,
        span_total=len(by_id),
        stages=breakdown,
        untracked_critical_ns=attribution.untracked_critical_ns,
        segments=attribution.segments,
        from_spans=True,
    )
