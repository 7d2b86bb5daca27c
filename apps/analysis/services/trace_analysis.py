"""Trace analysis as a shared pass: pipeline matching, stage attribution, stage samples.

Finalization (``finalize``) and a recompute's batches (``recompute``) run the same
analysis over the traces they lock, with each team's pipelines and rules as they are
now; they differ only in which traces they take. A trace whose analysis raises or
runs past ``TRACE_ANALYSIS_TIME_BUDGET_S``, or whose rows the database refuses, is
quarantined and the pass commits every other trace (``apps.core.isolated_pass``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from django.conf import settings

from apps.analysis.attribution import attribute_spans
from apps.analysis.critical_path import find_root
from apps.analysis.degradations import DegradationRow, degradation_rows
from apps.analysis.holdout import trace_in_holdout
from apps.analysis.llm_figures import stage_llm
from apps.analysis.pipeline_routing import PipelineRouter
from apps.analysis.services.analysis_writes import SampleRow, analyzed_write
from apps.analysis.spans import Span, unique_spans
from apps.analysis.stored_spans import spans_of_traces
from apps.analysis.trace_search import trace_search_hashes
from apps.core.isolated_pass import IsolatedPass, PassOutcome
from apps.core.isolation import failure_reason
from apps.core.models import QuarantineKind
from apps.core.quarantine import quarantine_record
from apps.ingest.models import Trace, TraceState
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import with_rules

logger = logging.getLogger(__name__)

# A trace analyzed, with the stage samples and the ledger rows it gets.
Analyzed = tuple[Trace, list[SampleRow], list[DegradationRow]]


@dataclass
class AnalysisResult:
    traces: int = 0
    matched: int = 0
    incomplete: int = 0
    samples: int = 0
    quarantined: int = 0


def analysis_result(outcome: PassOutcome[Trace, Sequence[Analyzed]]) -> AnalysisResult:
    """The counts of what commits with an analysis pass."""
    result = AnalysisResult(quarantined=len(outcome.quarantined))
    for group in outcome.written:
        for trace, samples, _ in group:
            result.traces += 1
            result.samples += len(samples)
            result.matched += trace.pipeline_id is not None
            result.incomplete += trace.incomplete
    return result


class TraceAnalysis(IsolatedPass[Trace, Analyzed, Sequence[Analyzed]]):
    """Analyze the locked traces and write what analysis found; which traces is the
    subclass's to say.

    Their stage samples are replaced, never added to; the rollup buckets they counted
    in before and count in now are marked dirty.
    """

    kind: ClassVar[str] = QuarantineKind.TRACE

    def __init__(self, *, now: datetime) -> None:
        self.now = now
        self.item_time_budget_s = settings.TRACE_ANALYSIS_TIME_BUDGET_S
        self.max_spans = settings.ANALYSIS_PASS_MAX_SPANS
        self.max_bytes = settings.ANALYSIS_PASS_MAX_BYTES
        self.idle = now - timedelta(seconds=settings.TRACE_IDLE_SECONDS)

    def begin(self, items: list[Trace]) -> list[Trace]:
        self.routers = _routers({t.team_id for t in items})
        self.spans = spans_of_traces(items)
        # The samples keep the pre-analysis revision and start of a trace seen before:
        # its old samples, stored under its old start, are replaced.
        self.before = {t.pk: (t.revision, t.pipeline_id, t.start_ns) for t in items}
        return items

    def work(self, item: Trace) -> Analyzed:
        router = self.routers[item.team_id]
        if isinstance(router, Exception):
            raise router
        return item, *_analyse_one(item, self.spans.get(item.pk, []), router, self.now, self.idle)

    def write(self, group: Sequence[Analyzed]) -> Sequence[Analyzed]:
        analyzed_write(group, self.before, self.now)
        return group

    def item_of(self, done: Analyzed) -> Trace:
        return done[0]

    def quarantine(self, item: Trace, reason: BaseException) -> None:
        trace_quarantine(item, reason)


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


def _analyse_one(
    trace: Trace, spans: list[Span], router: PipelineRouter, now: datetime, idle: datetime
) -> tuple[list[SampleRow], list[DegradationRow]]:
    trace.incomplete = trace.root_span_id is None
    # With its root and a span after ``idle`` it is settled: final later, with no write.
    settled = not trace.incomplete and trace.last_span_at > idle
    trace.state = TraceState.SETTLED if settled else TraceState.FINALIZED
    trace.finalized_at = now
    trace.revision += 1
    trace.pipeline_id = None  # the id, not the relation: its descriptor costs more
    if not spans:
        return [], []
    by_id = unique_spans(spans)
    root = find_root(by_id)
    trace.root_name, trace.root_service = root.name[:500], root.service[:200]
    trace.start_ns, trace.end_ns = root.start_ns, root.stop_ns
    trace.error = any(span.status_error for span in spans)
    samples, degradations = _samples(trace, by_id, root, router)
    # Sample rows hold (…, stage id at 1, …, wall at 5, critical-path time at 6, …);
    # ledger rows the stage id at 5.
    trace.search_hashes = trace_search_hashes(
        team_id=trace.team_id,
        root=root,
        spans=by_id.values(),
        stages=[(row[1], row[5], row[6]) for row in samples],
        e2e_ns=root.duration_ns,
        degraded=[row[5] for row in degradations],
    )
    return samples, degradations


def _samples(
    trace: Trace, by_id: dict[str, Span], root: Span, router: PipelineRouter
) -> tuple[list[SampleRow], list[DegradationRow]]:
    compiled = router.route(root)
    if compiled is None:
        trace.untracked_critical_ns = root.duration_ns
        return [], []
    trace.pipeline_id = compiled.pipeline.pk
    attribution = attribute_spans(by_id, root, compiled.matcher)
    trace.untracked_critical_ns = attribution.untracked_critical_ns
    trace.error = attribution.error
    if trace.incomplete:
        # Without its root the end-to-end time is unknown: keep the trace, skip samples.
        return [], []
    trace_pk, team_id, pipeline_id, stage_ids = (
        trace.pk,
        trace.team_id,
        trace.pipeline_id,
        compiled.stage_ids,
    )
    holdout = trace_in_holdout(by_id.values())
    llm = stage_llm(by_id, attribution.matches)
    samples: list[SampleRow] = []
    for slug, stage in attribution.stages.items():
        figures = llm.get(slug)
        model = stream = None
        if figures is not None:
            model, stream = figures.model, figures.stream
        samples.append(
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
                holdout,
                model,
                None if stream is None else stream.output_tokens,
                None if stream is None else stream.generation_ns,
                None if stream is None else stream.max_gap_ns,
            )
        )
    degradations = degradation_rows(
        trace_pk, team_id, pipeline_id, root, by_id.values(), stage_ids,
        compiled.pipeline.deadline_ms,
    )  # fmt: skip
    return samples, degradations
