"""The degradation ledger over a window: what the run-time clients did to keep a
pipeline's requests within their deadline, per stage (``docs/runtime.md``).

Read from the ledger rows analysis writes beside the stage samples, and set against the
requests the rollups counted in the same window. The rate is the share of requests
with a decision at a stage; a request rescued is one that met the pipeline's deadline
and would not have without the time its decisions are estimated to have saved.
"""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Max, Sum

from apps.analysis.models import Degradation, DegradationAction, DegradationWinner
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import E2E_STAGE_ID, Measure, RollupBucket
from apps.rollups.selectors.windows import tiles_filter, window_tiles

NS = 1_000_000_000
ACTION_NAMES = {action.value: action.label for action in DegradationAction}
WINNER_NAMES = {winner.value: winner.label for winner in DegradationWinner if winner.value}


@dataclass
class Tally:
    """Decisions of one stage, or of the whole pipeline."""

    decisions: int = 0
    traces: int = 0  # requests with at least one decision
    rescued: int = 0  # of those, requests rescued
    saved_ms: float = 0.0  # the clients' estimates, summed
    by_action: dict[str, int] = field(default_factory=dict)
    winners: dict[str, int] = field(default_factory=dict)

    def rate(self, requests: int) -> float | None:
        """Share of the requests with a decision, in percent."""
        return None if not requests else min(100.0 * self.traces / requests, 100.0)

    def rescued_share(self, requests: int) -> float | None:
        return None if not requests else min(100.0 * self.rescued / requests, 100.0)

    @property
    def mean_saved_ms(self) -> float | None:
        return self.saved_ms / self.decisions if self.decisions else None


@dataclass(frozen=True)
class StageLedger:
    stage: Stage
    tally: Tally
    requests: int

    @property
    def rate(self) -> float | None:
        return self.tally.rate(self.requests)


@dataclass(frozen=True)
class PipelineLedger:
    pipeline: Pipeline
    start: int
    end: int
    requests: int
    total: Tally
    stages: list[StageLedger]  # every stage, in order

    @property
    def rate(self) -> float | None:
        return self.total.rate(self.requests)

    @property
    def rescued_share(self) -> float | None:
        return self.total.rescued_share(self.requests)

    def stage(self, stage_id: int) -> StageLedger | None:
        return next((s for s in self.stages if s.stage.pk == stage_id), None)


def window_requests(*, pipeline: Pipeline, start: int, end: int) -> int:
    """The pipeline's requests (end-to-end samples) the rollups counted in ``[start, end)``."""
    _, tiles = window_tiles(pipeline_id=pipeline.pk, start=start, end=end)
    if not tiles:
        return 0
    total = (
        RollupBucket.objects.filter(
            tiles_filter(tiles),
            pipeline_id=pipeline.pk,
            stage_id=E2E_STAGE_ID,
            measure=Measure.WALL,
        )
        .aggregate(total=Sum("count"))
        .get("total")
    )
    return int(total or 0)


# One pass over the window's rows: per stage, action and winner the decisions and their
# saved time; per stage and overall the requests with a decision and those rescued.
_TALLY_SQL = f"""
SELECT stage_id, action, winner, count(*), sum(saved_ns)::bigint,
       NULL::bigint, NULL::bigint
FROM {Degradation._meta.db_table}
WHERE pipeline_id = %(pipeline)s AND start_ns >= %(low)s AND start_ns < %(high)s
GROUP BY stage_id, action, winner
UNION ALL
SELECT stage_id, NULL, NULL, NULL, NULL,
       count(DISTINCT trace_pk), count(DISTINCT trace_pk) FILTER (WHERE rescued)
FROM {Degradation._meta.db_table}
WHERE pipeline_id = %(pipeline)s AND start_ns >= %(low)s AND start_ns < %(high)s
GROUP BY GROUPING SETS ((stage_id), ())
"""


def pipeline_ledger(
    *,
    pipeline: Pipeline,
    start: int,
    end: int,
    requests: int | None = None,
    stages: Sequence[Stage] | None = None,
) -> PipelineLedger:
    """The ledger of ``[start, end)`` (epoch seconds). ``requests`` and ``stages`` (in
    order): the window's request count and the pipeline's stages, when the caller has
    them from the figures it read."""
    if requests is None:
        requests = window_requests(pipeline=pipeline, start=start, end=end)
    params = {"pipeline": pipeline.pk, "low": start * NS, "high": end * NS}
    with connection.cursor() as cursor:
        cursor.execute(_TALLY_SQL, params)
        rows = cursor.fetchall()
    tallies: dict[int | None, Tally] = defaultdict(Tally)
    total = Tally()
    for stage_id, action, winner, count, saved_ns, traces, rescued in rows:
        if action is None:
            tally = tallies[stage_id] if stage_id is not None else total
            tally.traces, tally.rescued = traces, rescued
            continue
        name = ACTION_NAMES.get(action, "other")
        saved_ms = (saved_ns or 0) / 1_000_000
        for tally in (tallies[stage_id], total):
            tally.decisions += count
            tally.saved_ms += saved_ms
            tally.by_action[name] = tally.by_action.get(name, 0) + count
            if winner in WINNER_NAMES:
                label = WINNER_NAMES[winner]
                tally.winners[label] = tally.winners.get(label, 0) + count
    if stages is None:
        stages = list(Stage.objects.filter(pipeline=pipeline).order_by("position", "id"))
    rows = [StageLedger(stage, tallies.get(stage.pk, Tally()), requests) for stage in stages]
    return PipelineLedger(pipeline, start, end, requests, total, rows)


def degradation_counts(
    *, pipeline: Pipeline, start: int, end: int, step: int, stage: Stage | None = None
) -> dict[int, int]:
    """Decisions per ``step`` seconds from ``start`` (epoch seconds of each step's start)."""
    rows = Degradation.objects.filter(
        pipeline_id=pipeline.pk, start_ns__gte=start * NS, start_ns__lt=end * NS
    )
    if stage is not None:
        rows = rows.filter(stage_id=stage.pk)
    with connection.cursor() as cursor:
        sql, params = rows.values("start_ns").query.sql_with_params()
        cursor.execute(
            f"SELECT (start_ns / %s) * %s, count(*) FROM ({sql}) AS d GROUP BY 1",
            [step * NS, step, *params],
        )
        return {int(moment): count for moment, count in cursor.fetchall()}


def degraded_trace_ids(
    *, pipeline: Pipeline, start: int, end: int, stage: Stage | None = None, limit: int = 5
) -> list[str]:
    """Hex ids of up to ``limit`` requests of ``[start, end)`` with a decision (at
    ``stage``, or at any), slowest first: the examples of a degradation alert."""
    rows = Degradation.objects.filter(
        pipeline_id=pipeline.pk, start_ns__gte=start * NS, start_ns__lt=end * NS
    )
    if stage is not None:
        rows = rows.filter(stage_id=stage.pk)
    trace_pks = list(
        rows.values("trace_pk")
        .annotate(slowest_ns=Max("e2e_ns"))
        .order_by("-slowest_ns", "trace_pk")
        .values_list("trace_pk", flat=True)[:limit]
    )
    hex_ids = {
        pk: bytes(trace_id).hex()
        for pk, trace_id in Trace.objects.filter(pk__in=trace_pks).values_list("pk", "trace_id")
    }
    return [hex_ids[pk] for pk in trace_pks if pk in hex_ids]
