"""The holdout's stage times: how long each stage takes in the requests the run-time
client ran without levers (``docs/runtime.md``, "Holdout"), exact over the samples."""

from dataclasses import dataclass, field

from django.db import connection

from apps.analysis.models import StageSample
from apps.core.percentiles import QUANTILES
from apps.ingest.models import Trace

# The runtime document's uncut figures: the median a skip saves, the tails a hedge waits
# for and a cut call would have run to.
UNCUT_PERCENTILES = ("p50", "p95", "p99")
# The newest samples read, over all the pipeline's stages: bounds the work of a busy
# pipeline's document (a few hundred per stage make a p99; this is far past that).
MAX_HOLDOUT_SAMPLES = 50_000

_TABLE = StageSample._meta.db_table
# The holdout's newest samples of a range: its partial index on (pipeline, start) walked
# newest first, stopping at the cap. Both reads below start here.
_RECENT = f"""
    SELECT trace_pk, stage_id, wall_ns FROM {_TABLE}
    WHERE pipeline_id = %(pipeline)s AND holdout
        AND start_ns >= %(start)s AND start_ns < %(end)s
    ORDER BY start_ns DESC
    LIMIT %(limit)s
"""  # noqa: S608 - the table name is the model's
# The percentiles are exact over what the walk read.
_SQL = f"""
    WITH recent AS ({_RECENT})
    SELECT stage_id, count(*),
        percentile_disc(%(quantiles)s::float8[]) WITHIN GROUP (ORDER BY wall_ns)
    FROM recent GROUP BY stage_id
"""  # noqa: S608 - built from the constant above


@dataclass(frozen=True)
class UncutTimes:
    count: int = 0
    percentiles: dict[str, float | None] = field(
        default_factory=lambda: dict.fromkeys(UNCUT_PERCENTILES)
    )


def holdout_stage_times(
    *, pipeline_id: int, start_ns: int, end_ns: int, limit: int = MAX_HOLDOUT_SAMPLES
) -> dict[int, UncutTimes]:
    """Per stage id: the holdout samples' count and wall-time percentiles in ms, over the
    traces started in [start_ns, end_ns); stages without holdout samples are absent."""
    quantiles = [QUANTILES[name] for name in UNCUT_PERCENTILES]
    params: dict[str, int | list[float]] = {
        "pipeline": pipeline_id,
        "start": start_ns,
        "end": end_ns,
        "limit": limit,
        "quantiles": quantiles,
    }
    with connection.cursor() as cursor:
        cursor.execute(_SQL, params)
        rows = cursor.fetchall()
    return {
        stage_id: UncutTimes(
            count=count,
            percentiles={
                name: round(value / 1e6, 3)
                for name, value in zip(UNCUT_PERCENTILES, values, strict=True)
            },
        )
        for stage_id, count, values in rows
    }


@dataclass(frozen=True)
class HoldoutRequests:
    """The end-to-end times of the holdout's requests over a range."""

    count: int = 0
    within: int = 0  # of them, within the deadline given
    p95_ms: float | None = None
    p99_ms: float | None = None

    @property
    def within_share(self) -> float | None:
        return 100.0 * self.within / self.count if self.count else None


_TRACES = Trace._meta.db_table
# The holdout's traces come from its partial index on the samples (a trace has a sample
# per stage: distinct), newest first up to the cap; their end-to-end times from the
# trace rows, by primary key.
_REQUESTS_SQL = f"""
    WITH held AS (SELECT DISTINCT trace_pk FROM ({_RECENT}) AS recent)
    SELECT count(*),
        count(*) FILTER (WHERE t.end_ns - t.start_ns <= %(deadline)s),
        percentile_disc(ARRAY[0.95, 0.99]::float8[])
            WITHIN GROUP (ORDER BY t.end_ns - t.start_ns)
    FROM {_TRACES} AS t JOIN held ON t.id = held.trace_pk
    WHERE t.end_ns IS NOT NULL AND t.start_ns IS NOT NULL
"""  # noqa: S608 - the table name is the model's


def holdout_requests(
    *,
    pipeline_id: int,
    start_ns: int,
    end_ns: int,
    deadline_ms: int | None,
    limit: int = MAX_HOLDOUT_SAMPLES,
) -> HoldoutRequests:
    """The holdout's requests that started in [start_ns, end_ns): how many, how many met
    ``deadline_ms`` (none without one), and their end-to-end p95 and p99 in ms."""
    params: dict[str, int | float] = {
        "pipeline": pipeline_id,
        "start": start_ns,
        "end": end_ns,
        "limit": limit,
        "deadline": -1 if deadline_ms is None else deadline_ms * 1_000_000,
    }
    with connection.cursor() as cursor:
        cursor.execute(_REQUESTS_SQL, params)
        count, within, tails = cursor.fetchone()
    if not count:
        return HoldoutRequests()
    p95, p99 = (round(value / 1e6, 3) for value in tails)
    return HoldoutRequests(count=count, within=within, p95_ms=p95, p99_ms=p99)
