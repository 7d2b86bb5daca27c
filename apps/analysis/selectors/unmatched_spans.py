"""The spans of a pipeline's traces that no stage took, grouped, biggest cost first.

This read takes the pipeline's newest analyzed traces of a window apart with the
pipeline's current rules, as the trace page does, and groups their unmatched spans
(``apps.analysis.untracked_time``: no rule took them, no stage span holds them) by
name, service and kind: how many, in how many traces, their time, their time on the
critical path and what they hold, their median duration, the values of the attributes
that say what they are (``TELLING_KEYS``), and a first rule for each
(``apps.analysis.rule_suggestions``). The rest of the untracked time (the root's own,
no stage on purpose, parts of spans a stage took in part) is summed beside them, and
all of it adds up to the sample's untracked critical-path time.

Like the rule tester it reads whole traces, newest first, until ``SAMPLE_TRACES``
traces, ``SPAN_CAP`` spans or ``UNMATCHED_SPANS_MAX_BYTES`` of what it reads (span
skeletons, the attributes the rules compare and the telling ones), and says how far
back that took it.
"""

import hashlib
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from apps.analysis.pipeline_routing import compile_pipeline
from apps.analysis.rule_suggestions import (
    StageChoice,
)
from apps.analysis.span_groups import (
    TELLING_KEYS,
    GroupKey,
    SpanGroupBuilder,
    UnmatchedSpanGroup,
    group_key,
)
from apps.analysis.span_projection import span_projection
from apps.analysis.spans import Span, unique_spans
from apps.analysis.stage_matching import (
    StageMatcher,
    no_stage_specs_from_pipeline,
    stage_specs_from_pipeline,
)
from apps.analysis.stored_spans import spans_read
from apps.analysis.untracked_time import trace_untracked
from apps.core.cached import cached_for
from apps.core.time import datetime_to_ns, ns_to_ms
from apps.core.windows import named_windows
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import pipeline_with_stages

WINDOWS = named_windows("15m", "1h", "6h", "24h", "7d")
DEFAULT_WINDOW = "24h"
SAMPLE_TRACES = 200
SPAN_CAP = 20_000
GROUPS_SHOWN = 50
# The same sample for every member who opens the page within this long.
CACHE_S = 30
_TRACE_FIELDS = ("pk", "trace_id", "span_count", "first_span_start_ns", "last_span_start_ns")


@dataclass(frozen=True)
class StageReach:
    slug: str
    name: str
    traces: int  # traces of the sample with a span part in the stage


@dataclass(frozen=True)
class UnmatchedSpans:
    window: str
    since: datetime
    traces: int
    spans: int
    bytes_read: int
    byte_budget: int
    span_cap: int
    stopped_by: str  # which bound ended the sample early: "spans", "bytes" or ""
    e2e_ns: int  # the traces' end-to-end time, summed
    untracked_ns: int  # their untracked critical-path time: the four below added up
    unmatched_ns: int  # of the spans in ``groups`` (all groups, shown or not)
    root_ns: int
    no_stage_ns: int
    partial_ns: int
    unmatched_spans: int
    group_count: int
    groups: tuple[UnmatchedSpanGroup, ...]  # at most GROUPS_SHOWN, biggest cost first
    stages: tuple[StageReach, ...]  # in stage order

    @property
    def untracked_share(self) -> float | None:
        """Of the sample's end-to-end time."""
        return self.untracked_ns / self.e2e_ns if self.e2e_ns else None

    @property
    def parts_ms(self) -> dict[str, float]:
        """The end-to-end and untracked critical-path time in ms, and its parts, by name."""
        parts = ("e2e", "untracked", "unmatched", "root", "no_stage", "partial")
        return {part: ns_to_ms(getattr(self, f"{part}_ns")) for part in parts}

    @property
    def empty_stages(self) -> list[StageReach]:
        return [stage for stage in self.stages if not stage.traces]

    def share_of_traces(self, group: UnmatchedSpanGroup) -> float:
        return group.traces / self.traces if self.traces else 0.0

    def share_of_untracked(self, group: UnmatchedSpanGroup) -> float:
        return group.critical_ns / self.untracked_ns if self.untracked_ns else 0.0


@dataclass
class _Sample:
    e2e_ns: int = 0
    untracked_ns: int = 0
    root_ns: int = 0
    no_stage_ns: int = 0
    partial_ns: int = 0
    stage_traces: Counter[str] = field(default_factory=Counter)
    groups: dict[GroupKey, SpanGroupBuilder] = field(default_factory=dict)


def unmatched_spans_recent(
    *, pipeline: Pipeline, window: str = DEFAULT_WINDOW, limit: int = GROUPS_SHOWN
) -> UnmatchedSpans:
    """``unmatched_spans`` as computed within the last ``CACHE_S`` with the same rules: a
    rule saved since is a new key, so the answer never predates the rules. Every ``limit``
    shares one answer of ``GROUPS_SHOWN`` groups: asking for another is no new read."""
    loaded = pipeline_with_stages(pipeline=pipeline)
    rules = (
        [(stage.slug, stage.name) for stage in loaded.stages.all()],
        stage_specs_from_pipeline(loaded),
        no_stage_specs_from_pipeline(loaded),
    )
    digest = hashlib.sha256(repr(rules).encode()).hexdigest()[:24]
    found = cached_for(
        f"analysis:unmatched-spans:{pipeline.pk}:{window}:{digest}",
        seconds=CACHE_S,
        compute=lambda: unmatched_spans(pipeline=loaded, window=window),
    )
    return replace(found, groups=found.groups[:limit])


def unmatched_spans(
    *,
    pipeline: Pipeline,
    window: str = DEFAULT_WINDOW,
    limit: int = GROUPS_SHOWN,
    now: datetime | None = None,
) -> UnmatchedSpans:
    """The spans no stage took in the pipeline's newest analyzed traces of ``window``."""
    since = (now or timezone.now()) - WINDOWS[window].delta
    loaded = pipeline_with_stages(pipeline=pipeline)
    stages = [StageChoice(stage.slug, stage.name) for stage in loaded.stages.all()]
    matcher = compile_pipeline(loaded).matcher
    recent = Trace.objects.filter(
        team_id=pipeline.team_id,
        pipeline=pipeline,
        state__in=ANALYZED_STATES,
        start_ns__gte=datetime_to_ns(since),
    ).order_by("-start_ns", "-id")
    chosen: list[Trace] = []
    spans = 0
    stopped_by = ""
    for trace in recent.only(*_TRACE_FIELDS)[:SAMPLE_TRACES]:
        if spans + trace.span_count > SPAN_CAP:
            stopped_by = "spans"
            break
        chosen.append(trace)
        spans += trace.span_count
    budget = settings.UNMATCHED_SPANS_MAX_BYTES
    read = spans_read(
        chosen, projection=span_projection(matcher.rules, shown=TELLING_KEYS), max_bytes=budget
    )
    if read.left_out_from is not None:
        stopped_by = "bytes"
        chosen = chosen[: [t.pk for t in chosen].index(read.left_out_from)]
    sample = _Sample()
    by_trace = read.by_trace()
    for trace in chosen:
        by_id = unique_spans(by_trace.get(trace.pk, ()))
        if by_id:
            _add_trace(sample, trace.pk, by_id, matcher)
    hexes = {trace.pk: bytes(trace.trace_id).hex() for trace in chosen}
    empty = {stage.slug for stage in stages if not sample.stage_traces[stage.slug]}
    ordered = sorted(sample.groups.items(), key=lambda item: (*item[1].sort_key, item[0]))
    return UnmatchedSpans(
        window=window,
        since=since,
        traces=len(chosen),
        spans=len(read.spans),
        bytes_read=read.bytes_read,
        byte_budget=budget,
        span_cap=SPAN_CAP,
        stopped_by=stopped_by,
        e2e_ns=sample.e2e_ns,
        untracked_ns=sample.untracked_ns,
        unmatched_ns=sum(group.critical_ns for group in sample.groups.values()),
        root_ns=sample.root_ns,
        no_stage_ns=sample.no_stage_ns,
        partial_ns=sample.partial_ns,
        unmatched_spans=sum(group.spans for group in sample.groups.values()),
        group_count=len(sample.groups),
        groups=tuple(group.finished(key, hexes, stages, empty) for key, group in ordered[:limit]),
        stages=tuple(StageReach(s.slug, s.name, sample.stage_traces[s.slug]) for s in stages),
    )


def _add_trace(
    sample: _Sample, trace_pk: int, by_id: dict[str, Span], matcher: StageMatcher
) -> None:
    found = trace_untracked(by_id, matcher)
    sample.e2e_ns += found.e2e_ns
    sample.untracked_ns += found.untracked_ns
    sample.root_ns += found.root_ns
    sample.no_stage_ns += found.no_stage_ns
    sample.partial_ns += found.partial_ns
    sample.stage_traces.update(found.stages)
    for item in found.unmatched:
        sample.groups.setdefault(group_key(item.span), SpanGroupBuilder()).add(item, trace_pk)
