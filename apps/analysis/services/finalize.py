"""Finalize quiet traces: pipeline matching, stage attribution and stage samples."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.analysis.attribution import attribute_spans
from apps.analysis.critical_path import find_root
from apps.analysis.models import StageSample
from apps.analysis.pipeline_routing import PipelineRouter
from apps.analysis.services.dirty_buckets import dirty_buckets_mark
from apps.analysis.spans import Span, unique_spans
from apps.analysis.stored_spans import spans_of_traces
from apps.analysis.trace_search import trace_search_hashes
from apps.core.crash_guard import (
    WorkerDied,
    claim_close,
    claim_open,
    claimed_ids,
    claimed_run,
    crash_strikes,
    strikes_clear,
    suspect_run,
    within_budget,
)
from apps.core.isolation import (
    ItemDeadline,
    failure_reason,
    is_transient,
    items_run,
    pass_statement_timeout,
)
from apps.core.models import QuarantineKind
from apps.core.quarantine import quarantine_record
from apps.core.sql_arrays import array_literal
from apps.core.transactions import commit_without_waiting
from apps.ingest.models import Trace, TraceState
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import with_rules

logger = logging.getLogger(__name__)


@dataclass
class FinalizeResult:
    traces: int = 0
    matched: int = 0
    incomplete: int = 0
    samples: int = 0
    quarantined: int = 0


def _routers(team_ids: set[int]) -> dict[int, PipelineRouter | Exception]:
    """Each team's compiled pipelines; a team whose rules fail to compile gets the error."""
    pipelines = with_rules(Pipeline.objects.filter(team_id__in=team_ids))
    by_team: dict[int, list[Pipeline]] = defaultdict(list)
    for pipeline in pipelines:
        by_team[pipeline.team_id].append(pipeline)
    routers: dict[int, PipelineRouter | Exception] = {}
    for team_id in team_ids:
        try:
            routers[team_id] = PipelineRouter(by_team.get(team_id, []))
        except Exception as exc:  # one team's configuration never stops another's traces
            routers[team_id] = exc
    return routers


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

    A trace whose analysis raises or runs past ``TRACE_ANALYSIS_TIME_BUDGET_S``, or
    whose rows the database refuses, is quarantined (see ``apps.core.quarantine``);
    the pass commits every other trace. A trace that was in a pass whose worker died
    is analyzed alone, and quarantined once its passes have died
    ``PASS_CRASH_STRIKES`` times (see ``apps.core.crash_guard``).
    """
    now = now or timezone.now()
    suspects = crash_strikes(kind=QuarantineKind.TRACE)
    if suspects:
        suspect = _suspect_finalize(suspects, now)
        if suspect is not None:
            return suspect
    with transaction.atomic():
        due = Trace.objects.filter(_due(now), state=TraceState.OPEN).exclude(pk__in=suspects)
        due = due.exclude(pk__in=claimed_ids(kind=QuarantineKind.TRACE))
        due = due.order_by("last_span_at").select_for_update(skip_locked=True)
        ids = within_budget(
            due.values_list("id", "span_count", "byte_count")[:limit],
            max_spans=settings.ANALYSIS_PASS_MAX_SPANS,
            max_bytes=settings.ANALYSIS_PASS_MAX_BYTES,
        )
        claim = claim_open(kind=QuarantineKind.TRACE, item_ids=ids) if ids else None
    if claim is None:
        return FinalizeResult()
    return claimed_run(claim, lambda isolate: _finalize_pass(now, ids, claim, isolate=isolate))


def _suspect_finalize(suspects: dict[int, int], now: datetime) -> FinalizeResult | None:
    """One due trace that was in a pass that died: quarantined, or analyzed on its own.

    None when no suspect is due: the usual pass runs, without them.
    """
    kind = QuarantineKind.TRACE
    open_ids = set(
        Trace.objects.filter(pk__in=list(suspects), state=TraceState.OPEN).values_list(
            "id", flat=True
        )
    )
    gone = [pk for pk in suspects if pk not in open_ids]
    if gone:  # analyzed by another pass, or set aside already
        strikes_clear(kind=kind, item_ids=gone)
    trace = Trace.objects.filter(_due(now), pk__in=open_ids).order_by("id").first()
    if trace is None:
        return None

    def quarantine(reason: WorkerDied) -> FinalizeResult:
        trace_quarantine(trace, reason)
        return FinalizeResult(quarantined=1)

    return suspect_run(
        kind=kind,
        item_id=trace.pk,
        strikes=suspects[trace.pk],
        quarantine=quarantine,
        run=lambda claim, isolate: _finalize_pass(now, [trace.pk], claim, isolate=isolate),
    )


def _finalize_pass(now: datetime, ids: list[int], claim: int, *, isolate: bool) -> FinalizeResult:
    with transaction.atomic():
        commit_without_waiting()  # a lost commit leaves its traces open: finalized again
        pass_statement_timeout()
        # Due again: a span may have arrived since the claim, and the trace waits for quiet.
        due = Trace.objects.filter(_due(now), pk__in=ids, state=TraceState.OPEN)
        traces = list(due.order_by("last_span_at").select_for_update(skip_locked=True))
        claim_close(claim)  # commits with the traces' analysis, or not at all
        if not traces:
            return FinalizeResult()
        return traces_analyse(traces, spans_of_traces(traces), now=now, isolate=isolate)


def traces_analyse(
    traces: list[Trace], spans: dict[int, list[Span]], *, now: datetime, isolate: bool
) -> FinalizeResult:
    """Analyze these traces, locked by the caller's transaction, with their team's
    pipelines and rules as they are now, and write what analysis found.

    Their stage samples are replaced, never added to; the rollup buckets they counted
    in before and count in now are marked dirty. A trace whose analysis fails is
    quarantined. Finalization and re-analysis on demand (``recompute``) both run it.
    """
    result = FinalizeResult()
    routers = _routers({t.team_id for t in traces})
    analyzed: list[tuple[Trace, list[SampleRow]]] = []
    failed: list[tuple[Trace, BaseException]] = []
    idle = now - timedelta(seconds=settings.TRACE_IDLE_SECONDS)
    # The samples keep the pre-analysis revision and start of a trace seen before:
    # its old samples, stored under its old start, are replaced.
    before = {t.pk: (t.revision, t.pipeline_id, t.start_ns) for t in traces}
    with ItemDeadline(settings.TRACE_ANALYSIS_TIME_BUDGET_S) as deadline:
        for trace in traces:
            router = routers[trace.team_id]
            try:
                if isinstance(router, Exception):
                    raise router
                deadline.restart()
                samples = _finalize_one(trace, spans.get(trace.pk, []), router, now, idle)
                deadline.stop()
            except Exception as exc:
                deadline.disarm()
                if is_transient(exc):
                    raise
                failed.append((trace, exc))
                continue
            analyzed.append((trace, samples))
    written = items_run(
        analyzed,
        lambda group: _analyzed_write(group, before, now),
        isolate=isolate,
        on_failure=lambda item, exc: failed.append((item[0], exc)),
    )
    for trace, error in failed:
        trace_quarantine(trace, error)
    for group in written:
        for trace, samples in group:
            result.traces += 1
            result.samples += len(samples)
            result.matched += trace.pipeline_id is not None
            result.incomplete += trace.incomplete
    result.quarantined = len(failed)
    return result


def _analyzed_write(
    group: Sequence[tuple[Trace, list[SampleRow]]],
    before: dict[int, tuple[int, int | None, int | None]],
    now: datetime,
) -> Sequence[tuple[Trace, list[SampleRow]]]:
    """Replace the samples of these analyzed traces and store what analysis found."""
    traces = [trace for trace, _ in group]
    samples = [row for _, rows in group for row in rows]
    seen = [before[t.pk] for t in traces if before[t.pk][0]]
    # A trace finalized before may have counted in another pipeline or bucket.
    refinalized = [(t.pk, before[t.pk][2]) for t in traces if before[t.pk][0]]
    touched: set[tuple[int | None, int | None]] = {(pipeline, start) for _, pipeline, start in seen}
    touched |= {(t.pipeline_id, t.start_ns) for t in traces if not t.incomplete}
    _samples_delete(refinalized)
    _samples_copy(samples)
    _traces_update(traces, now)
    dirty_buckets_mark(touched)
    return group


def traces_release(trace_pks: list[int]) -> int:
    """Put quarantined traces back into analysis: due at the next pass."""
    return Trace.objects.filter(pk__in=trace_pks, state=TraceState.QUARANTINED).update(
        state=TraceState.OPEN
    )


def trace_quarantine(trace: Trace, exc: BaseException) -> None:
    reason = failure_reason(exc)
    logger.warning("trace %s quarantined: %s", trace.pk, reason)
    Trace.objects.filter(pk=trace.pk).update(state=TraceState.QUARANTINED)
    quarantine_record(
        kind=QuarantineKind.TRACE, item_id=trace.pk, team_id=trace.team_id, reason=reason
    )


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
            f"DELETE FROM {StageSample._meta.db_table} "
            "WHERE trace_pk = ANY(%s::bigint[]) AND start_ns = ANY(%s::bigint[])",
            [array_literal(trace_pks), array_literal(starts)],
        )


def _samples_copy(samples: list[SampleRow]) -> None:
    """Binary COPY: thousands of samples per pass, without per-row ORM work."""
    columns = ", ".join(SAMPLE_COLUMNS)
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        with cursor.copy(
            f"COPY {StageSample._meta.db_table} ({columns}) FROM STDIN (FORMAT BINARY)"
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
    params += [[t.root_name for t in traces], [t.root_service for t in traces]]
    # The search sets as one flat array and each trace's slice of it: an array of arrays
    # cannot be unnested by row, and a literal per trace costs PostgreSQL a parse each.
    flat: list[int] = []
    first: list[int | None] = []
    last: list[int | None] = []
    for t in traces:
        hashes = t.search_hashes
        if hashes is None:
            first.append(None)
            last.append(None)
        else:
            first.append(len(flat) + 1)
            flat.extend(hashes)
            last.append(len(flat))
    # Integers only: written directly, where ``array_literal`` tests each value's type.
    params += [array_literal(first), array_literal(last), f"{{{','.join(map(str, flat))}}}", now]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {Trace._meta.db_table} AS t SET
                state = v.state, finalized_at = %s,
                revision = v.revision, pipeline_id = v.pipeline_id,
                incomplete = v.incomplete, error = v.error, start_ns = v.start_ns,
                end_ns = v.end_ns, root_name = v.root_name, root_service = v.root_service,
                untracked_critical_ns = v.untracked,
                search_hashes = CASE WHEN v.first IS NOT NULL
                    THEN coalesce((%s::bigint[])[v.first:v.last], '{{}}') END
            FROM unnest({arrays}, %s::text[], %s::text[], %s::int[], %s::int[])
                AS v({", ".join(numbers)}, root_name, root_service, first, last)
            WHERE t.id = v.id
            """,
            [params[-1], params[-2], *params[:-2]],
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
    samples = _samples(trace, by_id, root, router)
    # Sample rows hold (…, stage id at 1, …, wall at 5, critical-path time at 6, …).
    trace.search_hashes = trace_search_hashes(
        team_id=trace.team_id,
        root=root,
        spans=by_id.values(),
        stages=[(row[1], row[5], row[6]) for row in samples],
        e2e_ns=root.duration_ns,
    )
    return samples


def _samples(
    trace: Trace, by_id: dict[str, Span], root: Span, router: PipelineRouter
) -> list[SampleRow]:
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
