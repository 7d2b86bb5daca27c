"""A span rule tried on recent traces before it is saved, with the matcher analysis uses.

It reads the newest traces whole, newest first, until ``SPAN_CAP`` spans or
``RULE_TEST_MAX_BYTES`` of what it reads (span skeletons and the attributes the rules
compare, never whole attributes), and says how far back that took it.

A rule takes more than the spans it matches: the spans inside them that no rule takes
count in their stage (``apps.analysis.stage_inheritance``), and a no-stage rule keeps
those out of every stage. So each trace is also analysed with and without the rule, and
the spans whose stage changes only through inheritance are counted with their time on
the critical path (``BroughtAlong``).
"""

from collections import Counter
from dataclasses import dataclass, field

from django.conf import settings

from apps.analysis.attribution import TraceAttribution, attribute_spans
from apps.analysis.critical_path import find_root
from apps.analysis.pipeline_routing import compile_pipeline
from apps.analysis.span_projection import span_projection
from apps.analysis.spans import Span, unique_spans
from apps.analysis.stage_matching import (
    CompiledRule,
    RuleSpec,
    StageMatcher,
    StageSpec,
    no_stage_specs_from_pipeline,
    stage_specs_from_pipeline,
)
from apps.analysis.stored_spans import spans_read
from apps.core.time import NS_PER_MS, ns_to_ms
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.selectors import pipeline_with_stages

RECENT_TRACES = 200
SPAN_CAP = 20_000
EXAMPLES = 5
UNTRACKED = "untracked"
# What ``spans_read`` needs of a trace besides its id.
_TRACE_FIELDS = ("pk", "trace_id", "span_count", "first_span_start_ns", "last_span_start_ns")


@dataclass
class RuleExample:
    """Matched spans alike (name, service, kind): how many, the slowest, one trace."""

    trace_hex: str
    name: str
    service: str
    kind: str
    count: int = 0
    slowest_ms: float = 0.0


@dataclass
class BroughtAlong:
    """Spans no rule takes whose stage the rule changes, through the spans it takes that
    hold them: how many, in how many traces, and their time on the critical path, where
    it went and where it was before (by stage name, or ``UNTRACKED``)."""

    spans: int = 0
    traces: int = 0
    critical_ns: int = 0
    to: Counter[str] = field(default_factory=Counter)  # critical ns by where it goes
    was: Counter[str] = field(default_factory=Counter)  # critical ns by where it was
    names: Counter[str] = field(default_factory=Counter)

    @property
    def critical_ms_per_trace(self) -> float:
        return ns_to_ms(self.critical_ns // self.traces) if self.traces else 0.0

    @property
    def examples(self) -> list[tuple[str, int]]:
        """The most frequent names, a few of them; ties by name, so the answer is stable."""
        return sorted(self.names.items(), key=lambda item: (-item[1], item[0]))[:EXAMPLES]

    @property
    def was_per_trace(self) -> list[tuple[str, float]]:
        """Where their critical-path time was before, a trace on average, largest first."""
        ordered = sorted(self.was.items(), key=lambda item: (-item[1], item[0]))
        return [(where, ns_to_ms(ns // self.traces)) for where, ns in ordered]


@dataclass
class RuleTest:
    traces: int = 0
    spans: int = 0
    matched_spans: int = 0
    matched_traces: int = 0
    # Spans the rule matches that a rule of an earlier stage takes first (first match
    # wins), by that stage's name. For a no-stage rule, every stage is earlier.
    taken_earlier: Counter[str] = field(default_factory=Counter)
    kinds: dict[tuple[str, str, str], RuleExample] = field(default_factory=dict)
    brought: BroughtAlong = field(default_factory=BroughtAlong)
    bytes_read: int = 0
    # Which budget stopped the test before RECENT_TRACES: "spans", "bytes" or "".
    stopped_by: str = ""
    span_cap: int = SPAN_CAP
    byte_budget: int = 0

    @property
    def examples(self) -> list[RuleExample]:
        """The most frequent kinds of matched span, a few of them."""
        return sorted(self.kinds.values(), key=lambda e: (-e.count, e.name))[:EXAMPLES]

    @property
    def taken_by_stage(self) -> list[tuple[str, int]]:
        return self.taken_earlier.most_common()


def _with_candidate(pipeline: Pipeline, stage: Stage | None, spec: RuleSpec) -> StageMatcher:
    """The pipeline's matcher with ``spec`` saved after the stage's last rule, or after the
    last no-stage rule when ``stage`` is None: what analysis would run once it is saved."""
    stages = stage_specs_from_pipeline(pipeline)
    no_stage = no_stage_specs_from_pipeline(pipeline)
    if stage is None:
        last = max((rule.position for rule in no_stage), default=-1)
        return StageMatcher(stages, [*no_stage, _placed(spec, last + 1)])
    for index, stage_spec in enumerate(stages):
        if stage_spec.slug == stage.slug:
            last = max((rule.position for rule in stage_spec.rules), default=-1)
            rules = [*stage_spec.rules, _placed(spec, last + 1)]
            stages[index] = StageSpec(stage_spec.slug, rules, stage_spec.position)
    return StageMatcher(stages, no_stage)


def _placed(spec: RuleSpec, position: int) -> RuleSpec:
    return RuleSpec(
        span_name=spec.span_name,
        name_match=spec.name_match,
        attributes=dict(spec.attributes),
        span_kind=spec.span_kind,
        service=spec.service,
        portion=spec.portion,
        first_token_event=spec.first_token_event,
        position=position,
    )


def rule_test(*, pipeline: Pipeline, stage: Stage | None, spec: RuleSpec) -> RuleTest:
    """Which spans of the pipeline's most recent analyzed traces ``spec`` matches, and
    which spans inside them it would bring along into ``stage`` (or, with ``stage``
    None, a no-stage rule would keep out of every stage).

    The candidate rule is compiled as analysis compiles rules; the pipeline's saved
    rules decide which earlier stage would take a matched span first.
    """
    result = RuleTest(byte_budget=settings.RULE_TEST_MAX_BYTES)
    candidate = CompiledRule(stage.slug if stage is not None else None, spec)
    loaded = pipeline_with_stages(pipeline=pipeline)
    names = {s.slug: s.name for s in loaded.stages.all()}
    earlier = {
        s.slug: s.name for s in loaded.stages.all() if stage is None or s.position < stage.position
    }
    saved = compile_pipeline(loaded).matcher
    trial = _with_candidate(loaded, stage, spec)
    chosen = _recent_traces(pipeline, result)
    read = spans_read(
        chosen,
        projection=span_projection((*saved.rules, candidate)),
        max_bytes=result.byte_budget,
    )
    if read.left_out_from is not None:
        result.stopped_by = "bytes"
        chosen = chosen[: [t.pk for t in chosen].index(read.left_out_from)]
    traces = {trace.pk: bytes(trace.trace_id).hex() for trace in chosen}
    result.traces = len(traces)
    result.bytes_read = read.bytes_read
    matched_traces: set[int] = set()
    for trace_pk, spans in read.by_trace().items():
        by_id = unique_spans(spans)
        result.spans += len(spans)
        matched = [span for span in by_id.values() if candidate.matches(span)]
        if not matched:
            continue
        matched_traces.add(trace_pk)
        for span in matched:
            _count_match(result, span, saved, earlier, traces[trace_pk])
        root = find_root(by_id)
        _count_brought(
            result.brought,
            attribute_spans(by_id, root, saved),
            attribute_spans(by_id, root, trial),
            by_id,
            names,
        )
    result.matched_traces = len(matched_traces)
    return result


def _recent_traces(pipeline: Pipeline, result: RuleTest) -> list[Trace]:
    recent = Trace.objects.filter(
        pipeline=pipeline, state__in=ANALYZED_STATES, start_ns__isnull=False
    ).order_by("-start_ns", "-id")
    chosen: list[Trace] = []
    spans = 0
    for trace in recent.only(*_TRACE_FIELDS)[:RECENT_TRACES]:
        if spans + trace.span_count > SPAN_CAP:
            result.stopped_by = "spans"
            break
        chosen.append(trace)
        spans += trace.span_count
    return chosen


def _count_match(
    result: RuleTest, span: Span, saved: StageMatcher, earlier: dict[str, str], trace_hex: str
) -> None:
    result.matched_spans += 1
    taken = saved.match(span)
    first = taken.before_stage or taken.after_stage
    if first in earlier:
        result.taken_earlier[earlier[first]] += 1
        return
    key = (span.name, span.service, span.kind)
    example = result.kinds.get(key)
    if example is None:
        example = result.kinds[key] = RuleExample(trace_hex, *key)
    example.count += 1
    example.slowest_ms = max(example.slowest_ms, (span.stop_ns - span.start_ns) / NS_PER_MS)


def _count_brought(
    brought: BroughtAlong,
    before: TraceAttribution,
    after: TraceAttribution,
    by_id: dict[str, Span],
    names: dict[str, str],
) -> None:
    # Only spans no rule takes can change stage through inheritance; with the rule saved,
    # one whose parts go elsewhere than before changed because an ancestor's did.
    moved = {
        span_id
        for span_id, match in after.matches.items()
        if not match.decided and match != before.matches[span_id]
    }
    if not moved:
        return
    brought.traces += 1
    brought.spans += len(moved)
    brought.names.update(by_id[span_id].name for span_id in moved)
    for segment in after.segments:
        if segment.span_id in moved:
            brought.critical_ns += segment.duration_ns
            brought.to[_label(segment.stage, names)] += segment.duration_ns
    for segment in before.segments:
        if segment.span_id in moved:
            brought.was[_label(segment.stage, names)] += segment.duration_ns


def _label(stage: str | None, names: dict[str, str]) -> str:
    return UNTRACKED if stage is None else names.get(stage, stage)
