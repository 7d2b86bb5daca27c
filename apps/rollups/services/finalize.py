"""Finalize quiet traces: pipeline matching, stage attribution and stage samples."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Prefetch, Q
from django.utils import timezone

from apps.ingest.models import Span as StoredSpan
from apps.ingest.models import StatusCode, Trace, TraceState
from apps.ingest.services.span_writer import KINDS
from apps.pipelines.models import Pipeline, SpanRule, Stage
from apps.rollups.attribution import attribute_trace
from apps.rollups.critical_path import find_root
from apps.rollups.models import StageSample
from apps.rollups.pipeline_matching import PipelineRouter
from apps.rollups.services.dirty import dirty_buckets_mark
from apps.rollups.spans import Span, unique_spans

SPAN_FIELDS = (
    "trace_pk", "span_id", "parent_span_id", "name", "service", "kind", "start_ns", "end_ns",
    "attributes", "events", "status",
)  # fmt: skip


@dataclass
class FinalizeResult:
    traces: int = 0
    matched: int = 0
    incomplete: int = 0
    samples: int = 0


def _routers(team_ids: set[int]) -> dict[int, PipelineRouter]:
    pipelines = Pipeline.objects.filter(team_id__in=team_ids).prefetch_related(
        Prefetch(
            "stages",
            queryset=Stage.objects.order_by("position", "id").prefetch_related(
                Prefetch("rules", queryset=SpanRule.objects.order_by("position", "id"))
            ),
        )
    )
    by_team: dict[int, list[Pipeline]] = defaultdict(list)
    for pipeline in pipelines:
        by_team[pipeline.team_id].append(pipeline)
    return {team_id: PipelineRouter(by_team.get(team_id, [])) for team_id in team_ids}


def _analysis_span(row: tuple[Any, ...]) -> Span:
    _, span_id, parent, name, service, kind, start, end, attributes, events, status = row
    return Span(
        span_id=bytes(span_id).hex(),
        parent_id=bytes(parent).hex() if parent is not None else None,
        name=name,
        service=service,
        kind=KINDS[kind] if 0 <= kind < len(KINDS) else "unspecified",
        start_ns=start,
        end_ns=end,
        attributes=attributes or {},
        events=tuple((e["name"], e["time_ns"]) for e in events or ()),
        status_error=status == StatusCode.ERROR,
    )


def _due(now: datetime) -> Q:
    idle = now - timedelta(seconds=settings.TRACE_IDLE_SECONDS)
    waited = now - timedelta(seconds=settings.TRACE_MAX_WAIT_SECONDS)
    return Q(root_span_id__isnull=False, last_span_at__lte=idle) | Q(first_seen_at__lte=waited)


def traces_finalize_due(*, now: datetime | None = None, limit: int = 500) -> FinalizeResult:
    """Finalize up to ``limit`` open traces that went quiet, in one transaction.

    Claimed with ``FOR UPDATE SKIP LOCKED`` so several workers share the work; a
    trace finalized again after late spans has its samples replaced, never added.
    """
    now = now or timezone.now()
    result = FinalizeResult()
    with transaction.atomic():
        due = Trace.objects.filter(_due(now), state=TraceState.OPEN).order_by("last_span_at")
        if connection.features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True)
        traces = list(due[:limit])
        if not traces:
            return result
        spans: dict[int, list[Span]] = defaultdict(list)
        rows = StoredSpan.objects.filter(trace_pk__in=[t.pk for t in traces]).values_list(
            *SPAN_FIELDS
        )
        for row in rows:
            spans[row[0]].append(_analysis_span(row))
        routers = _routers({t.team_id for t in traces})

        # A trace finalized before may have counted in another pipeline or bucket.
        touched: set[tuple[int | None, int | None]] = {
            (t.pipeline_id, t.start_ns) for t in traces if t.revision
        }
        samples: list[StageSample] = []
        for trace in traces:
            samples += _finalize_one(trace, spans.get(trace.pk, []), routers[trace.team_id], now)
            result.matched += trace.pipeline_id is not None
            result.incomplete += trace.incomplete
        trace_pks = [t.pk for t in traces]
        touched |= {(t.pipeline_id, t.start_ns) for t in traces if not t.incomplete}
        StageSample.objects.filter(trace_pk__in=trace_pks).delete()
        StageSample.objects.bulk_create(samples, batch_size=1000)
        dirty_buckets_mark(touched)
        Trace.objects.bulk_update(traces, FINALIZED_FIELDS, batch_size=500)
        result.traces = len(traces)
        result.samples = len(samples)
    return result


FINALIZED_FIELDS = [
    "state", "finalized_at", "revision", "pipeline", "incomplete", "error", "start_ns",
    "end_ns", "root_name", "root_service", "untracked_critical_ns",
]  # fmt: skip


def _finalize_one(
    trace: Trace, spans: list[Span], router: PipelineRouter, now: datetime
) -> list[StageSample]:
    trace.state = TraceState.FINALIZED
    trace.finalized_at = now
    trace.revision += 1
    trace.incomplete = trace.root_span_id is None
    trace.pipeline = None
    if not spans:
        return []
    root = find_root(unique_spans(spans))
    trace.root_name, trace.root_service = root.name[:500], root.service[:200]
    trace.start_ns, trace.end_ns = root.start_ns, root.stop_ns
    trace.error = any(span.status_error for span in spans)
    compiled = router.route(root)
    if compiled is None:
        trace.untracked_critical_ns = root.duration_ns
        return []
    trace.pipeline = compiled.pipeline
    attribution = attribute_trace(spans, compiled.matcher)
    trace.untracked_critical_ns = attribution.untracked_critical_ns
    trace.error = attribution.error
    if trace.incomplete:
        # Without its root the end-to-end time is unknown: keep the trace, skip samples.
        return []
    return [
        StageSample(
            trace_pk=trace.pk,
            stage_id=compiled.stage_ids[slug],
            start_ns=root.start_ns,
            team_id=trace.team_id,
            pipeline_id=compiled.pipeline.pk,
            wall_ns=stage.wall_ns,
            critical_ns=stage.critical_ns,
            span_count=stage.span_count,
            error=stage.error,
        )
        for slug, stage in attribution.stages.items()
    ]
