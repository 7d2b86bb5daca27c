"""Finalize quiet traces: the traces due for analysis, and the pass that takes them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.analysis.services.trace_analysis import AnalysisResult, TraceAnalysis, analysis_result
from apps.core.isolated_pass import Candidate, pass_run
from apps.ingest.models import Trace, TraceState

# Traces per pass: a pass has fixed costs (the teams' pipelines and rules, half a dozen
# statements), which a few thousand traces share.
FINALIZE_BATCH = 2000


def _settle_seconds() -> float:
    return min(settings.TRACE_SETTLE_SECONDS, settings.TRACE_IDLE_SECONDS)


class Finalization(TraceAnalysis):
    """The open traces that went quiet, the longest quiet first."""

    def __init__(self, *, now: datetime, limit: int) -> None:
        super().__init__(now=now)
        self.max_items = limit

    def waiting(self) -> QuerySet[Trace]:
        return Trace.objects.filter(state=TraceState.OPEN)

    def due(self, waiting: QuerySet[Any]) -> QuerySet[Trace]:
        settled = self.now - timedelta(seconds=_settle_seconds())
        waited = self.now - timedelta(seconds=settings.TRACE_MAX_WAIT_SECONDS)
        quiet = Q(root_span_id__isnull=False, last_span_at__lte=settled)
        return waiting.filter(quiet | Q(first_seen_at__lte=waited)).order_by("last_span_at")

    def candidates(self, due: QuerySet[Any]) -> Iterable[Candidate]:
        return due.values_list("id", "span_count", "byte_count")[: self.max_items]


def traces_finalize_due(
    *, now: datetime | None = None, limit: int = FINALIZE_BATCH
) -> AnalysisResult:
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
    return analysis_result(pass_run(Finalization(now=now or timezone.now(), limit=limit)))
