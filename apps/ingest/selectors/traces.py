"""A team's finalized traces, newest first, a keyset page at a time."""

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import ExpressionWrapper, F, Q, QuerySet
from django.db.models.enums import TextChoices
from django.db.models.fields import BigIntegerField

from apps.core.time import NS_PER_MS, ns_to_datetime, ns_to_ms
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.pipelines.models import Pipeline
from apps.teams.models import Team

MAX_INT64 = 2**63 - 1
UNMATCHED = "unmatched"


class TraceStatus(TextChoices):
    ERROR = "error", "error"
    INCOMPLETE = "incomplete", "incomplete"
    OK = "ok", "ok (no error, complete)"


@dataclass(frozen=True)
class TraceFilters:
    """``pipeline`` narrows to one pipeline; ``unmatched`` to traces that matched none."""

    pipeline: Pipeline | None = None
    unmatched: bool = False
    status: str = ""
    min_duration_ms: int | None = None


@dataclass(frozen=True)
class TraceCursor:
    """Where the next page starts: strictly older than (start_ns, id)."""

    start_ns: int
    id: int

    def encode(self) -> str:
        raw = f"{self.start_ns}.{self.id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> "TraceCursor":
        """Raises ValueError for anything ``encode`` did not produce."""
        if not text or len(text) > 64:
            raise ValueError("Not a cursor.")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise ValueError("Not a cursor.") from exc
        start, sep, pk = raw.partition(".")
        if not sep or not start.lstrip("-").isdigit() or not pk.isdigit():
            raise ValueError("Not a cursor.")
        cursor = cls(int(start), int(pk))
        if abs(cursor.start_ns) > MAX_INT64 or cursor.id > MAX_INT64:
            raise ValueError("Not a cursor.")
        return cursor


@dataclass(frozen=True)
class TraceSummary:
    trace: Trace

    @property
    def trace_id(self) -> str:
        return bytes(self.trace.trace_id).hex()

    @property
    def started_at(self) -> datetime:
        return ns_to_datetime(self.trace.start_ns or 0)

    @property
    def duration_ns(self) -> int:
        return self.trace.duration_ns or 0

    @property
    def duration_ms(self) -> float:
        return ns_to_ms(self.duration_ns)


@dataclass(frozen=True)
class TracePage:
    traces: list[TraceSummary]
    next_cursor: TraceCursor | None


def traces_for_team(*, team: Team, filters: TraceFilters | None = None) -> QuerySet[Trace]:
    """Analyzed (settled or finalized) traces with a known start, newest first, by id."""
    filters = filters or TraceFilters()
    traces = Trace.objects.filter(
        team=team, state__in=ANALYZED_STATES, start_ns__isnull=False
    ).select_related("pipeline")
    if filters.unmatched:
        traces = traces.filter(pipeline__isnull=True)
    elif filters.pipeline is not None:
        traces = traces.filter(pipeline=filters.pipeline)
    if filters.status == TraceStatus.ERROR:
        traces = traces.filter(error=True)
    elif filters.status == TraceStatus.INCOMPLETE:
        traces = traces.filter(incomplete=True)
    elif filters.status == TraceStatus.OK:
        traces = traces.filter(error=False, incomplete=False)
    if filters.min_duration_ms:
        duration = ExpressionWrapper(F("end_ns") - F("start_ns"), output_field=BigIntegerField())
        traces = traces.alias(elapsed_ns=duration).filter(
            elapsed_ns__gte=filters.min_duration_ms * NS_PER_MS
        )
    return traces.order_by("-start_ns", "-id")


def traces_page(
    *,
    team: Team,
    filters: TraceFilters | None = None,
    cursor: TraceCursor | None = None,
    limit: int = 50,
    narrow: Callable[[QuerySet[Trace]], QuerySet[Trace]] | None = None,
) -> TracePage:
    """A page of ``traces_for_team``; ``narrow`` adds conditions the steps above ingestion
    know (a stage over its budget, say), keeping the order and the keyset."""
    traces = traces_for_team(team=team, filters=filters)
    if narrow is not None:
        traces = narrow(traces)
    if cursor is not None:
        traces = traces.filter(
            Q(start_ns__lt=cursor.start_ns) | Q(start_ns=cursor.start_ns, id__lt=cursor.id)
        )
    rows = list(traces[: limit + 1])
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = TraceCursor(last.start_ns or 0, last.pk)
    return TracePage([TraceSummary(trace) for trace in rows], next_cursor)


def pipeline_for_filter(*, team: Team, slug: str) -> Pipeline | None:
    return Pipeline.objects.filter(team=team, slug=slug).first()
