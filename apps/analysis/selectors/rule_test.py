"""A span rule tried on recent traces before it is saved, with the matcher analysis uses."""

from collections import Counter
from dataclasses import dataclass, field

from apps.analysis.pipeline_routing import compile_pipeline
from apps.analysis.stage_matching import CompiledRule, RuleSpec
from apps.analysis.stored_spans import analysis_span
from apps.core.time import NS_PER_MS
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.ingest.models import Span as StoredSpan
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.selectors import pipeline_with_stages

RECENT_TRACES = 200
SPAN_CAP = 20_000
EXAMPLES = 5
SPAN_FIELDS = ("trace_pk", "span_id", "parent_span_id", "name", "service", "kind", "start_ns",
               "end_ns", "attributes", "events", "status")  # fmt: skip


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
class RuleTest:
    traces: int = 0
    spans: int = 0
    matched_spans: int = 0
    matched_traces: int = 0
    # Spans the rule matches that a rule of an earlier stage takes first (first match
    # wins), by that stage's name.
    taken_earlier: Counter[str] = field(default_factory=Counter)
    kinds: dict[tuple[str, str, str], RuleExample] = field(default_factory=dict)
    truncated: bool = False

    @property
    def examples(self) -> list[RuleExample]:
        """The most frequent kinds of matched span, a few of them."""
        return sorted(self.kinds.values(), key=lambda e: (-e.count, e.name))[:EXAMPLES]

    @property
    def taken_by_stage(self) -> list[tuple[str, int]]:
        return self.taken_earlier.most_common()


def rule_test(*, pipeline: Pipeline, stage: Stage, spec: RuleSpec) -> RuleTest:
    """Which spans of the pipeline's most recent analyzed traces ``spec`` matches.

    The candidate rule is compiled as analysis compiles rules; the pipeline's saved
    rules decide which earlier stage would take a matched span first.
    """
    result = RuleTest()
    candidate = CompiledRule(stage.slug, spec)
    loaded = pipeline_with_stages(pipeline=pipeline)
    earlier = {s.slug: s.name for s in loaded.stages.all() if s.position < stage.position}
    matcher = compile_pipeline(loaded).matcher
    traces = dict(
        Trace.objects.filter(pipeline=pipeline, state__in=ANALYZED_STATES, start_ns__isnull=False)
        .order_by("-start_ns", "-id")
        .values_list("pk", "trace_id")[:RECENT_TRACES]
    )
    result.traces = len(traces)
    rows = StoredSpan.objects.filter(trace_pk__in=list(traces)).values_list(*SPAN_FIELDS)
    matched_traces: set[int] = set()
    for trace_pk, *fields in rows[: SPAN_CAP + 1]:
        if result.spans == SPAN_CAP:
            result.truncated = True
            break
        result.spans += 1
        span = analysis_span(*fields)
        if not candidate.matches(span):
            continue
        result.matched_spans += 1
        matched_traces.add(trace_pk)
        taken = matcher.match(span)
        first = taken.before_stage or taken.after_stage
        if first in earlier:
            result.taken_earlier[earlier[first]] += 1
        else:
            key = (span.name, span.service, span.kind)
            example = result.kinds.get(key)
            if example is None:
                trace_hex = bytes(traces[trace_pk]).hex()
                example = result.kinds[key] = RuleExample(trace_hex, *key)
            example.count += 1
            example.slowest_ms = max(example.slowest_ms, (span.stop_ns - span.start_ns) / NS_PER_MS)
    result.matched_traces = len(matched_traces)
    return result
