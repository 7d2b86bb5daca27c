"""Traffic that matched no pipeline: which root spans, how often, how long.

Shown so a team can turn real traffic into pipelines; grouped by root span name
and service over a recent window.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import (
    Aggregate,
    Count,
    ExpressionWrapper,
    F,
    FloatField,
    Max,
    Q,
    QuerySet,
)
from django.db.models.fields import BigIntegerField
from django.utils import timezone

from apps.core.cached import cached_for
from apps.core.time import datetime_to_ns, ns_to_datetime, ns_to_ms
from apps.core.windows import named_windows
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.pipelines.name_patterns import exact_glob
from apps.teams.models import Team

WINDOWS = named_windows("1h", "6h", "24h", "7d")
DEFAULT_WINDOW = "24h"
ROOT_SPAN_GLOB_MAX = 200  # Pipeline.match_root_span
# Up to a week of a team's traces grouped: not again for every refresh within this long.
CACHE_S = 30


class PercentileCont(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: F | ExpressionWrapper, fraction: float) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError("A percentile is a fraction between 0 and 1.")
        super().__init__(expression, fraction=repr(float(fraction)))


def root_span_glob(name: str) -> str:
    """A glob matching exactly ``name``; a name too long for the field keeps its start and ``*``."""
    return exact_glob(name, max_length=ROOT_SPAN_GLOB_MAX)


@dataclass(frozen=True)
class UnmatchedGroup:
    root_name: str
    service: str
    count: int
    error_count: int
    p50_ns: float
    p95_ns: float
    last_seen_ns: int

    @property
    def p50_ms(self) -> float:
        return ns_to_ms(round(self.p50_ns))

    @property
    def p95_ms(self) -> float:
        return ns_to_ms(round(self.p95_ns))

    @property
    def last_seen(self) -> datetime:
        return ns_to_datetime(self.last_seen_ns)

    @property
    def root_span_glob(self) -> str:
        return root_span_glob(self.root_name)


@dataclass(frozen=True)
class UnmatchedSummary:
    window: str
    since: datetime
    total: int  # unmatched traces in the window, all groups
    groups: list[UnmatchedGroup]


def _duration() -> ExpressionWrapper:
    return ExpressionWrapper(F("end_ns") - F("start_ns"), output_field=BigIntegerField())


def _unmatched(team: Team, since_ns: int) -> QuerySet[Trace]:
    # start_ns leads the (team, pipeline, start_ns) index, with pipeline IS NULL.
    return Trace.objects.filter(
        team=team,
        pipeline__isnull=True,
        start_ns__gte=since_ns,
        end_ns__isnull=False,
        state__in=ANALYZED_STATES,
        # Without its root a trace's first span is no root span to build a pipeline on.
        incomplete=False,
    )


def unmatched_traffic_recent(
    *, team: Team, window: str = DEFAULT_WINDOW, limit: int = 20
) -> UnmatchedSummary:
    """``unmatched_traffic`` as computed within the last ``CACHE_S``."""
    return cached_for(
        f"ingest:unmatched:{team.pk}:{window}:{limit}",
        seconds=CACHE_S,
        compute=lambda: unmatched_traffic(team=team, window=window, limit=limit),
    )


def unmatched_traffic(
    *, team: Team, window: str = DEFAULT_WINDOW, now: datetime | None = None, limit: int = 20
) -> UnmatchedSummary:
    """The most frequent (root span name, service) pairs among unmatched traces in the window."""
    now = now or timezone.now()
    since = now - WINDOWS[window].delta
    traces = _unmatched(team, datetime_to_ns(since))
    grouped = (
        traces.values("root_name", "root_service")
        .annotate(
            count=Count("id"),
            error_count=Count("id", filter=Q(error=True)),
            last_seen_ns=Max("start_ns"),
        )
        .annotate(p50=PercentileCont(_duration(), 0.5), p95=PercentileCont(_duration(), 0.95))
        .order_by("-count", "root_name", "root_service")
    )
    groups = []
    for row in grouped[:limit]:
        values: dict[str, Any] = dict(row)
        groups.append(
            UnmatchedGroup(
                root_name=values["root_name"],
                service=values["root_service"],
                count=values["count"],
                error_count=values["error_count"],
                p50_ns=values["p50"] or 0.0,
                p95_ns=values["p95"] or 0.0,
                last_seen_ns=values["last_seen_ns"],
            )
        )
    return UnmatchedSummary(window=window, since=since, total=traces.count(), groups=groups)
