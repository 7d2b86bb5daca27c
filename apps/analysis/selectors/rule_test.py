"""A span rule tried on recent traces before it is saved, with the matcher analysis uses.

It reads the newest traces whole, newest first, until ``SPAN_CAP`` spans or
``RULE_TEST_MAX_BYTES`` of what it reads (span skeletons and the attributes the rules
compare, never whole attributes), and says how far back that took it.
"""

from collections import Counter
from dataclasses import dataclass, field

from django.conf import settings

from apps.analysis.pipeline_routing import compile_pipeline
from apps.analysis.span_projection import span_projection
from apps.analysis.stage_matching import CompiledRule, RuleSpec
from apps.analysis.stored_spans import spans_read
from apps.core.time import NS_PER_MS
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.selectors import pipeline_with_stages

RECENT_TRACES = 200
SPAN_CAP = 20_000
EXAMPLES = 5
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
class RuleTest:
    traces: int = 0
    spans: int = 0
    matched_spans: int = 0
    matched_traces: int = 0
    # Spans the rule matches that a rule of an earlier stage takes first (first match
    # wins), by that stage's name.
    taken_earlier: Counter[str] = field(default_factory=Counter)
    kinds: dict[tuple[str, str, str], RuleExample] = field(default_factory=dict)
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


def rule_test(*, pipeline: Pipeline, stage: Stage, spec: RuleSpec) -> RuleTest:
    """Which spans of the pipeline's most recent analyzed traces ``spec`` matches.

    The candidate rule is compiled as analysis compiles rules; the pipeline's saved
    rules decide which earlier stage would take a matched span first.
    """
    result = RuleTest(byte_budget=settings.RULE_TEST_MAX_BYTES)
    candidate = CompiledRule(stage.slug, spec)
    loaded = pipeline_with_stages(pipeline=pipeline)
    earlier = {s.slug: s.name for s in loaded.stages.all() if s.position < stage.position}
    matcher = compile_pipeline(loaded).matcher
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
    read = spans_read(
        chosen,
        projection=span_projection((*matcher.rules, candidate)),
        max_bytes=result.byte_budget,
    )
    if read.left_out_from is not None:
        result.stopped_by = "bytes"
        chosen = chosen[: [t.pk for t in chosen].index(read.left_out_from)]
    traces = {trace.pk: bytes(trace.trace_id).hex() for trace in chosen}
    result.traces = len(traces)
    result.bytes_read = read.bytes_read
    matched_traces: set[int] = set()
    for trace_pk, span, _, _ in read.spans:
        result.spans += 1
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
                example = result.kinds[key] = RuleExample(traces[trace_pk], *key)
            example.count += 1
            example.slowest_ms = max(example.slowest_ms, (span.stop_ns - span.start_ns) / NS_PER_MS)
    result.matched_traces = len(matched_traces)
    return result
