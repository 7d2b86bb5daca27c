"""What the traces API returns, and how a trace analysis becomes that.

Times inside a trace are nanosecond offsets from its root span's start, so that
every number fits a JSON double exactly; absolute times are RFC 3339, and the
root's start is also given as a decimal string of Unix nanoseconds.
"""

from typing import Any

from django.utils import timezone
from rest_framework import serializers

from apps.analysis.selectors import TraceAnalysis
from apps.analysis.stage_reasons import REASON_KINDS, StageReason
from apps.ingest.selectors import MAX_SHOWN_VALUES, ShownValue, SpanContent, TraceSummary


class TraceSummaryOutput(serializers.Serializer):
    trace_id = serializers.CharField(help_text="32 hex digits.")
    start_time = serializers.DateTimeField()
    start_unix_nano = serializers.CharField(help_text="The root's start, Unix nanoseconds.")
    root_name = serializers.CharField()
    service = serializers.CharField()
    pipeline = serializers.CharField(allow_null=True, help_text="Slug; null: matched none.")
    duration_ms = serializers.FloatField()
    span_count = serializers.IntegerField()
    error = serializers.BooleanField()
    incomplete = serializers.BooleanField(help_text="The root span never arrived.")

    class Meta:
        ref_name = "TraceSummary"


class TracePageOutput(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The next (older) page; null: last.")
    results = TraceSummaryOutput(many=True)

    class Meta:
        ref_name = "TracePage"


class SpanPartOutput(serializers.Serializer):
    start_offset_ns = serializers.IntegerField()
    end_offset_ns = serializers.IntegerField()
    stage = serializers.CharField(allow_null=True, help_text="Stage slug; null: untracked.")

    class Meta:
        ref_name = "TraceSpanPart"


class StageReasonRuleOutput(serializers.Serializer):
    id = serializers.IntegerField(help_text="The rule's id in the span rules API.")
    stage = serializers.CharField(
        allow_null=True, help_text="The rule's stage slug; null: a no-stage rule."
    )
    number = serializers.IntegerField(
        help_text="Its place, from 1, among its stage's rules (or the no-stage rules)."
    )
    description = serializers.CharField(help_text="Its conditions, as the editor shows them.")

    class Meta:
        ref_name = "TraceStageReasonRule"


class StageReasonOutput(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=list(REASON_KINDS),
        help_text="rule: a stage rule took the span; inherited: no rule took it, and it "
        "counts where the nearest span above it that a rule took does (`inherited_from`); "
        "no_stage_rule: a no-stage rule keeps it, and what it holds, out of every stage; "
        "untracked: no rule took it, nor any span above it.",
    )
    rules = StageReasonRuleOutput(
        many=True,
        help_text="The rules that took it: one, or two when its first token splits it "
        "between two stages' rules. Empty unless kind is rule or no_stage_rule.",
    )
    inherited_from = serializers.CharField(
        allow_null=True, help_text="The span id it inherited its stage from."
    )
    text = serializers.CharField(help_text="In words, as the trace page shows it.")

    class Meta:
        ref_name = "TraceStageReason"


class SpanOutput(serializers.Serializer):
    span_id = serializers.CharField()
    parent_span_id = serializers.CharField(allow_null=True)
    depth = serializers.IntegerField(help_text="0 for the root; orphans hang off the root.")
    name = serializers.CharField()
    service = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.ChoiceField(choices=["unset", "ok", "error"])
    status_message = serializers.CharField()
    start_offset_ns = serializers.IntegerField()
    end_offset_ns = serializers.IntegerField()
    duration_ns = serializers.IntegerField()
    critical_ns = serializers.IntegerField(help_text="Its own time on the critical path.")
    parts = SpanPartOutput(many=True, help_text="Split at the first token when a rule asks.")
    stage = serializers.CharField(
        allow_null=True,
        help_text="Stage slug of its start (`parts` give each part's); null: in no stage.",
    )
    stage_reason = StageReasonOutput()

    class Meta:
        ref_name = "TraceSpan"


class SegmentOutput(serializers.Serializer):
    span_id = serializers.CharField()
    start_offset_ns = serializers.IntegerField()
    end_offset_ns = serializers.IntegerField()
    duration_ns = serializers.IntegerField()
    stage = serializers.CharField(allow_null=True, help_text="Stage slug; null: untracked.")

    class Meta:
        ref_name = "CriticalPathSegment"


class StageBreakdownOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    wall_ns = serializers.IntegerField(help_text="Union of the stage's span intervals.")
    critical_ns = serializers.IntegerField()
    share = serializers.FloatField(help_text="critical_ns over the end-to-end duration.")
    span_count = serializers.IntegerField()
    error = serializers.BooleanField()
    budget_ms = serializers.IntegerField(allow_null=True)
    budget_percentile = serializers.CharField()
    over = serializers.BooleanField(
        allow_null=True,
        help_text="This trace's wall time above the budget; null: no budget, or no span of "
        "the trace in the stage (span_count 0).",
    )

    class Meta:
        ref_name = "TraceStageBreakdown"


class BreakdownOutput(serializers.Serializer):
    # The body's key; DRF takes declared fields off the class, so Field.source is untouched.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["spans", "stage_samples"],
        help_text="stage_samples: the spans aged out; no waterfall, the finalized breakdown.",
    )
    e2e_ns = serializers.IntegerField()
    stages = StageBreakdownOutput(many=True)
    untracked_critical_ns = serializers.IntegerField()
    critical_sum_ns = serializers.IntegerField(help_text="Stages plus untracked.")
    adds_up = serializers.BooleanField(help_text="critical_sum_ns equals e2e_ns.")

    class Meta:
        ref_name = "TraceBreakdown"


class TraceDetailOutput(TraceSummaryOutput):
    state = serializers.ChoiceField(
        choices=["open", "settled", "finalized"],
        help_text="open: assembling; settled: analyzed, and a span arriving within "
        "TRACE_IDLE_SECONDS of the last one recomputes it; finalized: final.",
    )
    finalized_at = serializers.DateTimeField(
        allow_null=True, help_text="When its derived data was last computed."
    )
    duration_ns = serializers.IntegerField()
    root_span_id = serializers.CharField(allow_null=True)
    spans_stored = serializers.IntegerField()
    spans_truncated = serializers.BooleanField()
    spans = SpanOutput(many=True)
    critical_path = SegmentOutput(many=True)
    breakdown = BreakdownOutput()

    class Meta:
        ref_name = "TraceDetail"


_CUT = (
    "Key → characters of each value given cut: longer than `value_chars`, it is given as "
    "its first `value_chars` characters (a string as it is, anything else as JSON text)."
)


class SpanEventOutput(serializers.Serializer):
    name = serializers.CharField()
    time_offset_ns = serializers.IntegerField(
        allow_null=True, help_text="After the span's start; null: the stored time is no number."
    )
    attributes = serializers.DictField()
    attributes_cut = serializers.DictField(child=serializers.IntegerField(), help_text=_CUT)

    class Meta:
        ref_name = "TraceSpanEvent"


class SpanContentOutput(serializers.Serializer):
    trace_id = serializers.CharField(help_text="32 hex digits.")
    span_id = serializers.CharField(help_text="16 hex digits.")
    attributes = serializers.DictField(help_text="As stored, each value up to `value_chars`.")
    attributes_cut = serializers.DictField(child=serializers.IntegerField(), help_text=_CUT)
    events = SpanEventOutput(many=True, help_text="In the order they were recorded.")
    value_chars = serializers.IntegerField(help_text="Longest value given whole, in characters.")
    entries = serializers.IntegerField(
        help_text="Attributes, events and their attributes the span holds."
    )
    entries_truncated = serializers.BooleanField(
        help_text=f"More than {MAX_SHOWN_VALUES} entries: the first ones are given."
    )

    class Meta:
        ref_name = "TraceSpanContent"


class SuggestedMatchOutput(serializers.Serializer):
    service = serializers.CharField()
    root_span = serializers.CharField(help_text="A glob matching this root span name.")

    class Meta:
        ref_name = "SuggestedPipelineMatch"


class UnmatchedGroupOutput(serializers.Serializer):
    root_name = serializers.CharField()
    service = serializers.CharField()
    count = serializers.IntegerField()
    error_count = serializers.IntegerField()
    p50_ms = serializers.FloatField()
    p95_ms = serializers.FloatField()
    last_seen = serializers.DateTimeField()
    suggested_match = SuggestedMatchOutput()

    class Meta:
        ref_name = "UnmatchedGroup"


class UnmatchedOutput(serializers.Serializer):
    window = serializers.CharField()
    since = serializers.DateTimeField()
    total = serializers.IntegerField(help_text="Unmatched traces in the window, all groups.")
    groups = UnmatchedGroupOutput(many=True)

    class Meta:
        ref_name = "UnmatchedTraffic"


def summary_data(summary: TraceSummary) -> dict[str, Any]:
    trace = summary.trace
    return {
        "trace_id": summary.trace_id,
        "start_time": summary.started_at,
        "start_unix_nano": str(trace.start_ns),
        "root_name": trace.root_name,
        "service": trace.root_service,
        "pipeline": trace.pipeline.slug if trace.pipeline else None,
        "duration_ms": summary.duration_ms,
        "span_count": trace.span_count,
        "error": trace.error,
        "incomplete": trace.incomplete,
    }


def stage_reason_data(reason: StageReason, names: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": reason.kind,
        "rules": [
            {
                "id": rule.rule_id,
                "stage": rule.stage,
                "number": rule.number,
                "description": rule.description,
            }
            for rule in reason.rules
        ],
        "inherited_from": reason.ancestor_id,
        "text": reason.text(names),
    }


def trace_detail_data(analysis: TraceAnalysis) -> dict[str, Any]:
    trace = analysis.trace
    zero = analysis.root_start_ns
    names = analysis.stage_names
    spans = [
        {
            "span_id": row.span_id,
            "parent_span_id": row.span.parent_id,
            "depth": row.depth,
            "name": row.span.name,
            "service": row.span.service,
            "kind": row.span.kind,
            "status": row.status,
            "status_message": row.status_message,
            "start_offset_ns": row.span.start_ns - zero,
            "end_offset_ns": row.span.stop_ns - zero,
            "duration_ns": row.span.duration_ns,
            "critical_ns": row.critical_ns,
            "parts": [
                {
                    "start_offset_ns": part.start_ns - zero,
                    "end_offset_ns": part.end_ns - zero,
                    "stage": part.stage,
                }
                for part in row.parts
            ],
            "stage": row.reason.stage,
            "stage_reason": stage_reason_data(row.reason, names),
        }
        for row in analysis.rows
    ]
    return {
        **summary_data(TraceSummary(trace)),
        "state": trace.state_label(timezone.now()),
        "finalized_at": trace.finalized_at,
        "duration_ns": analysis.e2e_ns,
        "root_span_id": analysis.root_span_id,
        "spans_stored": analysis.span_total,
        "spans_truncated": analysis.truncated,
        "spans": spans,
        "critical_path": [
            {
                "span_id": segment.span_id,
                "start_offset_ns": segment.start_ns - zero,
                "end_offset_ns": segment.end_ns - zero,
                "duration_ns": segment.duration_ns,
                "stage": segment.stage,
            }
            for segment in analysis.segments
        ],
        "breakdown": {
            "source": "spans" if analysis.from_spans else "stage_samples",
            "e2e_ns": analysis.e2e_ns,
            "stages": [
                {
                    "slug": item.stage.slug,
                    "name": item.stage.name,
                    "wall_ns": item.wall_ns,
                    "critical_ns": item.critical_ns,
                    "share": round(item.share, 6),
                    "span_count": item.span_count,
                    "error": item.error,
                    "budget_ms": item.budget_ms,
                    "budget_percentile": item.stage.budget_percentile,
                    "over": item.over,
                }
                for item in analysis.stages
            ],
            "untracked_critical_ns": analysis.untracked_critical_ns,
            "critical_sum_ns": analysis.critical_sum_ns,
            "adds_up": analysis.adds_up,
        },
    }


def _values(values: list[ShownValue]) -> dict[str, Any]:
    return {
        "attributes": {value.key: value.value for value in values},
        "attributes_cut": {value.key: value.length for value in values if value.cut},
    }


def span_content_data(*, trace_hex: str, span_hex: str, content: SpanContent) -> dict[str, Any]:
    return {
        "trace_id": trace_hex,
        "span_id": span_hex,
        **_values(content.attributes),
        "events": [
            {
                "name": event.name,
                "time_offset_ns": (
                    None if event.time_ns is None else event.time_ns - content.start_ns
                ),
                **_values(event.attributes),
            }
            for event in content.events
        ],
        "value_chars": content.display_chars,
        "entries": content.entries,
        "entries_truncated": content.left_out > 0,
    }
