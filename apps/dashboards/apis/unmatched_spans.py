"""The spans of a pipeline's recent traces that no stage took, grouped, with a rule each."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.analysis.selectors.unmatched_spans import (
    DEFAULT_WINDOW,
    GROUPS_SHOWN,
    SAMPLE_TRACES,
    WINDOWS,
    UnmatchedSpans,
    unmatched_spans_recent,
)
from apps.analysis.span_groups import TELLING_KEYS, UnmatchedSpanGroup
from apps.core.api.views import ApiView
from apps.core.time import ns_to_ms
from apps.pipelines.access import pipeline_for_request
from apps.teams.api_schema import team_schema


def _query(name: str, kind: Any, description: str, **extra: Any) -> OpenApiParameter:
    return OpenApiParameter(name, kind, OpenApiParameter.QUERY, description=description, **extra)


class SampleOutput(serializers.Serializer):
    traces = serializers.IntegerField()
    spans = serializers.IntegerField()
    bytes_read = serializers.IntegerField()
    byte_budget = serializers.IntegerField(help_text="UNMATCHED_SPANS_MAX_BYTES.")
    span_cap = serializers.IntegerField()
    stopped_by = serializers.CharField(
        help_text="The bound that ended the sample before its trace count: `spans`, `bytes`, "
        "or empty for none.",
    )

    class Meta:
        ref_name = "UnmatchedSpansSample"


class UntrackedOutput(serializers.Serializer):
    critical_ms = serializers.FloatField(help_text="The sum of the four parts below.")
    share = serializers.FloatField(allow_null=True, help_text="Of end_to_end_ms.")
    unmatched_ms = serializers.FloatField(help_text="In the spans of `groups`, all of them.")
    root_ms = serializers.FloatField(help_text="The root span's own time.")
    partial_ms = serializers.FloatField(
        help_text="Parts of spans a stage took only in part (and what inherits them)."
    )
    no_stage_ms = serializers.FloatField(
        help_text="Spans a no-stage rule took, and the spans under them no rule took."
    )

    class Meta:
        ref_name = "UnmatchedSpansUntracked"


class StageOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    traces = serializers.IntegerField(help_text="Traces of the sample with a span in it.")

    class Meta:
        ref_name = "UnmatchedSpansStage"


class ValueOutput(serializers.Serializer):
    value = serializers.CharField()
    spans = serializers.IntegerField()

    class Meta:
        ref_name = "UnmatchedSpansAttributeValue"


class AttributeOutput(serializers.Serializer):
    key = serializers.CharField()
    spans = serializers.IntegerField(help_text="Spans of the group that carry it.")
    distinct = serializers.IntegerField(help_text="Distinct values among them.")
    values = ValueOutput(many=True, help_text="The most frequent values, at most 3.")

    class Meta:
        ref_name = "UnmatchedSpansAttribute"


class GroupRefOutput(serializers.Serializer):
    name = serializers.CharField()
    service = serializers.CharField()
    kind = serializers.CharField()

    class Meta:
        ref_name = "UnmatchedSpanGroupRef"


class SuggestionOutput(serializers.Serializer):
    stage = serializers.CharField(help_text="The slug of the stage it is suggested for.")
    rule = serializers.DictField(
        help_text="A body for POST /api/v1/pipelines/{slug}/stages/{stage}/rules/."
    )
    describe = serializers.CharField()

    class Meta:
        ref_name = "UnmatchedSpansRuleSuggestion"


class GroupOutput(serializers.Serializer):
    name = serializers.CharField()
    service = serializers.CharField()
    kind = serializers.CharField()
    spans = serializers.IntegerField()
    traces = serializers.IntegerField()
    trace_share = serializers.FloatField(help_text="Of the sample's traces.")
    total_ms = serializers.FloatField(help_text="The sum of the spans' durations.")
    critical_ms = serializers.FloatField(help_text="Their time on the critical path.")
    untracked_share = serializers.FloatField(help_text="critical_ms of untracked critical_ms.")
    held_critical_ms = serializers.FloatField(
        help_text="critical_ms and that of the unmatched spans under these: what a rule for "
        "them would bring into a stage, as those would inherit it."
    )
    inside = GroupRefOutput(
        allow_null=True,
        help_text="The group whose spans hold every one of these: a rule for it takes these "
        "too. Null: not all under one group.",
    )
    p50_ms = serializers.FloatField(help_text="Median span duration.")
    attributes = AttributeOutput(many=True)
    example_trace_id = serializers.CharField(help_text="The trace of the longest span.")
    suggested_rule = SuggestionOutput(allow_null=True, help_text="Null: no stage yet.")

    class Meta:
        ref_name = "UnmatchedSpanGroup"


class UnmatchedSpansOutput(serializers.Serializer):
    window = serializers.CharField()
    since = serializers.DateTimeField()
    sample = SampleOutput()
    end_to_end_ms = serializers.FloatField(help_text="The sample's end-to-end time, summed.")
    untracked = UntrackedOutput()
    stages = StageOutput(many=True)
    group_count = serializers.IntegerField(help_text="Groups in all; `groups` has the first.")
    groups = GroupOutput(many=True)

    class Meta:
        ref_name = "UnmatchedSpans"


class PipelineUnmatchedSpansApi(ApiView):
    class InputSerializer(serializers.Serializer):
        window = serializers.ChoiceField(choices=list(WINDOWS), default=DEFAULT_WINDOW)
        limit = serializers.IntegerField(min_value=1, max_value=GROUPS_SHOWN, default=20)

    @team_schema(
        summary="Spans of the pipeline's recent traces that no stage took",
        description=(
            "The pipeline's newest analyzed traces of the window (at most "
            f"{SAMPLE_TRACES}, within a span and byte budget: see `sample`), taken apart "
            "with its current rules. Spans no rule took and no stage span holds are grouped "
            "by name, service and kind, most time on the critical path first, with the "
            f"values of the attributes that say what they are ({', '.join(TELLING_KEYS)}) "
            "and a suggested rule. `untracked` splits the untracked critical-path time "
            "into those spans, the root span's own time, parts of spans a stage took only "
            "in part, and spans in no stage on purpose. Answers are kept for 30 seconds "
            "per window and set of rules."
        ),
        parameters=[
            _query(
                "window",
                OpenApiTypes.STR,
                f"Traces that started this long ago at most (default {DEFAULT_WINDOW}).",
                enum=list(WINDOWS),
            ),
            _query("limit", OpenApiTypes.INT, f"Groups, 1 to {GROUPS_SHOWN} (default 20)."),
        ],
        responses={200: UnmatchedSpansOutput},
        tags=["pipelines"],
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        query = self.InputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = unmatched_spans_recent(pipeline=pipeline, **query.validated_data)
        return Response(UnmatchedSpansOutput(unmatched_spans_data(found)).data)


def _group_data(found: UnmatchedSpans, group: UnmatchedSpanGroup) -> dict[str, Any]:
    suggestion = group.suggestion
    rule: dict[str, Any] | None = None
    if suggestion is not None:
        body: dict[str, Any] = {"name_match": "glob"}
        if suggestion.attribute is not None:
            body["attributes"] = dict([suggestion.attribute])
        else:
            body["span_name"] = suggestion.span_name
        rule = {"stage": suggestion.stage_slug, "rule": body, "describe": suggestion.describe()}
    return {
        "name": group.name,
        "service": group.service,
        "kind": group.kind,
        "spans": group.spans,
        "traces": group.traces,
        "trace_share": found.share_of_traces(group),
        "total_ms": group.total_ms,
        "critical_ms": group.critical_ms,
        "untracked_share": found.share_of_untracked(group),
        "held_critical_ms": group.held_ms,
        "inside": None
        if group.inside is None
        else dict(zip(("name", "service", "kind"), group.inside, strict=True)),
        "p50_ms": group.p50_ms,
        "attributes": [
            {
                "key": a.key,
                "spans": a.spans,
                "distinct": a.distinct,
                "values": [{"value": value, "spans": count} for value, count in a.values],
            }
            for a in group.attributes
        ],
        "example_trace_id": group.example_trace_hex,
        "suggested_rule": rule,
    }


def unmatched_spans_data(found: UnmatchedSpans) -> dict[str, Any]:
    return {
        "window": found.window,
        "since": found.since,
        "sample": {
            "traces": found.traces,
            "spans": found.spans,
            "bytes_read": found.bytes_read,
            "byte_budget": found.byte_budget,
            "span_cap": found.span_cap,
            "stopped_by": found.stopped_by,
        },
        "end_to_end_ms": ns_to_ms(found.e2e_ns),
        "untracked": {
            "critical_ms": ns_to_ms(found.untracked_ns),
            "share": found.untracked_share,
            "unmatched_ms": ns_to_ms(found.unmatched_ns),
            "root_ms": ns_to_ms(found.root_ns),
            "partial_ms": ns_to_ms(found.partial_ns),
            "no_stage_ms": ns_to_ms(found.no_stage_ns),
        },
        "stages": [{"slug": s.slug, "name": s.name, "traces": s.traces} for s in found.stages],
        "group_count": found.group_count,
        "groups": [_group_data(found, group) for group in found.groups],
    }
