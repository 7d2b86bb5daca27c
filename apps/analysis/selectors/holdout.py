"""The holdout's stage times: how long each stage takes in the requests the run-time
client ran without levers (``docs/runtime.md``, "Holdout"), exact over the samples."""

from dataclasses import dataclass, field

from django.db import connection

from apps.analysis.models import StageSample
from apps.core.percentiles import QUANTILES

# The runtime document's uncut figures: the median a skip saves, the tails a hedge waits
# for and a cut call would have run to.
UNCUT_PERCENTILES = ("p50", "p95", "p99")
# The newest samples read, over all the pipeline's stages: bounds the work of a busy
# pipeline's document (a few hundred per stage make a p99; this is far past that).
MAX_HOLDOUT_SAMPLES = 50_000

_TABLE = StageSample._meta.db_table
# The partial index on the holdout (pipeline, start) is walked newest first and stops
# at the cap; the percentiles are then exact over what it read.
_SQL = f"""
    WITH recent AS (
        SELECT stage_id, wall_ns FROM {_TABLE}
        WHERE pipeline_id = %(pipeline)s AND holdout
            AND start_ns >= %(start)s AND start_ns < %(end)s
        ORDER BY start_ns DESC
        LIMIT %(limit)s
    )
    SELECT stage_id, count(*),
        percentile_disc(%(quantiles)s::float8[]) WITHIN GROUP (ORDER BY wall_ns)
    FROM recent GROUP BY stage_id
"""  # noqa: S608 - the table name is the model's


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
