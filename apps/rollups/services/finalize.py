"""Finalize quiet traces: pipeline matching, stage attribution and stage samples."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Prefetch, Q
from django.utils import timezone

from apps.core.sql_arrays import array_literal
from apps.core.transactions import commit_without_waiting
from apps.ingest.models import Span as StoredSpan
from apps.ingest.models import Trace, TraceState
from apps.ingest.stored import analysis_span
from apps.pipelines.models import Pipeline, SpanRule, Stage
from apps.rollups.attribution import attribute_spans
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


def _start_bounds(traces: list[Trace]) -> tuple[int, int] | None:
    """The span starts of all the traces, when every trace knows its own (older rows may not)."""
    firsts = [t.first_span_start_ns for t in traces]
    lasts = [t.last_span_start_ns for t in traces]
    if not traces or any(v is None for v in firsts + lasts):
        return None
    return min(v for v in firsts if v is not None), max(v for v in lasts if v is not None)


def _trace_spans(traces: list[Trace]) -> dict[int, list[Span]]:
    """The stored spans of the traces, as analysis spans, per trace row id."""
    trace_pks = [t.pk for t in traces]
    spans: dict[int, list[Span]] = defaultdict(list)
    if connection.vendor != "postgresql":
        rows = StoredSpan.objects.filter(trace_pk__in=trace_pks).values_list(*SPAN_FIELDS)
        for pk, *fields in rows:
            spans[pk].append(analysis_span(*fields))
        return spans
    # JSON columns come back as text and are decoded with msgspec, several times
    # faster than the ORM's json.loads per value; most spans have no events. The start
    # bounds (inlined as constants) let PostgreSQL skip the day partitions that cannot
    # hold these spans instead of probing every day's index for every trace.
    columns = ", ".join(f"{f}::text" if f in ("attributes", "events") else f for f in SPAN_FIELDS)
    sql = f"SELECT {columns} FROM ingest_span WHERE trace_pk = ANY(%s::bigint[])"
    params: list[int | str] = [array_literal(trace_pks)]
    bounds = _start_bounds(traces)
    if bounds is not None:
        sql += " AND start_ns BETWEEN %s AND %s"
        params += bounds
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    decode = msgspec.json.decode
    for pk, span_id, parent, name, service, kind, start, end, attributes, events, status in rows:
        fields = (span_id, parent, name, service, kind, start, end, decode(attributes))
        events = decode(events) if events != "[]" else None
        spans[pk].append(analysis_span(*fields, events, status))
    return spans


def _settle_seconds() -> float:
    return min(settings.TRACE_SETTLE_SECONDS, settings.TRACE_IDLE_SECONDS)


def _due(now: datetime) -> Q:
    settled = now - timedelta(seconds=_settle_seconds())
    waited = now - timedelta(seconds=settings.TRACE_MAX_WAIT_SECONDS)
    return Q(root_span_id__isnull=False, last_span_at__lte=settled) | Q(first_seen_at__lte=waited)


# Traces per pass: a pass has fixed costs (the teams' pipelines and rules, half a dozen
# statements), which a few thousand traces share.
FINALIZE_BATCH = 2000


def traces_finalize_due(
    *, now: datetime | None = None, limit: int = FINALIZE_BATCH
) -> FinalizeResult:
    """Analyze up to ``limit`` open traces that went quiet, in one transaction.

    A trace with its root is analyzed once it has been quiet for
    ``TRACE_SETTLE_SECONDS``, so its samples count within seconds; it is left SETTLED
    until ``TRACE_IDLE_SECONDS`` have passed (then final, with no further write), and a
    span arriving in between opens it again. One without a root waits
    ``TRACE_MAX_WAIT_SECONDS`` and is finalized incomplete. Claimed with ``FOR UPDATE
    SKIP LOCKED`` so several workers share the work; a trace analyzed again after new
    spans has its samples replaced, never added.
    """
    now = now or timezone.now()
    result = FinalizeResult()
    with transaction.atomic():
        commit_without_waiting()  # a lost commit leaves its traces open: finalized again
        due = Trace.objects.filter(_due(now), state=TraceState.OPEN).order_by("last_span_at")
        if connection.features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True)
        traces = list(due[:limit])
        if not traces:
            return result
        spans = _trace_spans(traces)
        routers = _routers({t.team_id for t in traces})

        # A trace finalized before may have counted in another pipeline or bucket, and
        # its old samples, stored under its old start, are replaced.
        refinalized = [(t.pk, t.start_ns) for t in traces if t.revision]
        touched: set[tuple[int | None, int | None]] = {
            (t.pipeline_id, t.start_ns) for t in traces if t.revision
        }
        samples: list[SampleRow] = []
        idle = now - timedelta(seconds=settings.TRACE_IDLE_SECONDS)
        for trace in traces:
            samples += _finalize_one(
                trace, spans.get(trace.pk, []), routers[trace.team_id], now, idle
            )
            result.matched += trace.pipeline_id is not None
            result.incomplete += trace.incomplete
        trace_pks = [t.pk for t in traces]
        touched |= {(t.pipeline_id, t.start_ns) for t in traces if not t.incomplete}
        if connection.vendor == "postgresql":
            _samples_delete(refinalized)
            _samples_copy(samples)
            _traces_update(traces, now)
        else:
            StageSample.objects.filter(trace_pk__in=trace_pks).delete()
            StageSample.objects.bulk_create(
                [StageSample(**dict(zip(SAMPLE_COLUMNS, row, strict=True))) for row in samples],
                batch_size=1000,
            )
            Trace.objects.bulk_update(traces, FINALIZED_FIELDS, batch_size=500)
        dirty_buckets_mark(touched)
        result.traces = len(traces)
        result.samples = len(samples)
    return result


FINALIZED_FIELDS = [
    "state", "finalized_at", "revision", "pipeline", "incomplete", "error", "start_ns",
    "end_ns", "root_name", "root_service", "untracked_critical_ns",
]  # fmt: skip


SAMPLE_COLUMNS = (
    "trace_pk", "stage_id", "start_ns", "team_id", "pipeline_id", "wall_ns", "critical_ns",
    "span_count", "error",
)  # fmt: skip
# A stage sample as a row in SAMPLE_COLUMNS order: model instances cost more than the COPY.
SampleRow = tuple[int, int, int, int, int, int, int, int, bool]
SAMPLE_TYPES = ("int8", "int8", "int8", "int8", "int8", "int8", "int8", "int4", "bool")


def _samples_delete(refinalized: list[tuple[int, int | None]]) -> None:
    """Delete the samples of traces finalized before, found by their partition key too.

    A first finalization has nothing to delete, and naming the old start times lets
    PostgreSQL look in their day partitions only, not in a month of them.
    """
    if not refinalized:
        return
    trace_pks = [pk for pk, _ in refinalized]
    starts = sorted({start for _, start in refinalized if start is not None})
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM rollups_stagesample "
            "WHERE trace_pk = ANY(%s::bigint[]) AND start_ns = ANY(%s::bigint[])",
            [array_literal(trace_pks), array_literal(starts)],
        )


def _samples_copy(samples: list[SampleRow]) -> None:
    """Binary COPY: thousands of samples per pass, without per-row ORM work."""
    columns = ", ".join(SAMPLE_COLUMNS)
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        with cursor.copy(
            f"COPY rollups_stagesample ({columns}) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(list(SAMPLE_TYPES))
            for sample in samples:
                copy.write_row(sample)


def _traces_update(traces: list[Trace], now: datetime) -> None:
    """One UPDATE … FROM unnest(arrays) instead of the ORM's CASE per field and row."""
    numbers: dict[str, tuple[str, list[int | bool | None]]] = {
        "id": ("bigint", [t.pk for t in traces]),
        "state": ("smallint", [t.state for t in traces]),
        "revision": ("int", [t.revision for t in traces]),
        "pipeline_id": ("bigint", [t.pipeline_id for t in traces]),
        "incomplete": ("bool", [t.incomplete for t in traces]),
        "error": ("bool", [t.error for t in traces]),
        "start_ns": ("bigint", [t.start_ns for t in traces]),
        "end_ns": ("bigint", [t.end_ns for t in traces]),
        "untracked": ("bigint", [t.untracked_critical_ns for t in traces]),
    }
    arrays = ", ".join(f"%s::{sql_type}[]" for sql_type, _ in numbers.values())
    params: list[Any] = [array_literal(values) for _, values in numbers.values()]
    params += [[t.root_name for t in traces], [t.root_service for t in traces], now]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE ingest_trace AS t SET
                state = v.state, finalized_at = %s,
                revision = v.revision, pipeline_id = v.pipeline_id,
                incomplete = v.incomplete, error = v.error, start_ns = v.start_ns,
                end_ns = v.end_ns, root_name = v.root_name, root_service = v.root_service,
                untracked_critical_ns = v.untracked
            FROM unnest({arrays}, %s::text[], %s::text[])
                AS v({", ".join(numbers)}, root_name, root_service)
            WHERE t.id = v.id
            """,
            [params[-1], *params[:-1]],
        )


def _finalize_one(
    trace: Trace, spans: list[Span], router: PipelineRouter, now: datetime, idle: datetime
) -> list[SampleRow]:
    trace.incomplete = trace.root_span_id is None
    # With its root and a span after ``idle`` it is settled: final later, with no write.
    settled = not trace.incomplete and trace.last_span_at > idle
    trace.state = TraceState.SETTLED if settled else TraceState.FINALIZED
    trace.finalized_at = now
    trace.revision += 1
    trace.pipeline_id = None  # the id, not the relation: its descriptor costs more
    if not spans:
        return []
    by_id = unique_spans(spans)
    root = find_root(by_id)
    trace.root_name, trace.root_service = root.name[:500], root.service[:200]
    trace.start_ns, trace.end_ns = root.start_ns, root.stop_ns
    trace.error = any(span.status_error for span in spans)
    compiled = router.route(root)
    if compiled is None:
        trace.untracked_critical_ns = root.duration_ns
        return []
    trace.pipeline_id = compiled.pipeline.pk
    attribution = attribute_spans(by_id, root, compiled.matcher)
    trace.untracked_critical_ns = attribution.untracked_critical_ns
    trace.error = attribution.error
    if trace.incomplete:
        # Without its root the end-to-end time is unknown: keep the trace, skip samples.
        return []
    trace_pk, team_id, pipeline_id, stage_ids = (
        trace.pk,
        trace.team_id,
        trace.pipeline_id,
        compiled.stage_ids,
    )
    return [
        (
            trace_pk,
            stage_ids[slug],
            root.start_ns,
            team_id,
            pipeline_id,
            stage.wall_ns,
            stage.critical_ns,
            stage.span_count,
            stage.error,
        )
        for slug, stage in attribution.stages.items()
    ]
