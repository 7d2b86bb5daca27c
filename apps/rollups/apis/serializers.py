"""Serializers of the rollups API, by resource: the query input they share, then what
each resource returns, the functions that shape selector results into it, and examples."""

import re
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.percentiles import QUANTILES
from apps.pipelines.models import Percentile
from apps.rollups.models import TIME_MEASURE_LABELS, Violation
from apps.rollups.selectors import WINDOWS, PipelinePercentiles, Window, requested_bounds
from apps.rollups.selectors.fit import PipelineFit
from apps.rollups.selectors.fit_suggestions import HEADROOM
from apps.rollups.selectors.objectives import ObjectiveStatus
from apps.rollups.selectors.violations import CLOSED, E2E, OPEN
from apps.rollups.selectors.windows import MAX_WINDOW_SECONDS, to_datetime

# --- Query input: a window, and a step for series ---------------------------------------------

_OFFSET_AFTER_SPACE = re.compile(r" (\d{2}:?\d{2})$")
_STEP = re.compile(r"^(\d{1,7})([smhd]?)$")
_STEP_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class Rfc3339Field(serializers.DateTimeField):
    """A timestamp with its UTC offset; naive times are refused rather than guessed."""

    def to_internal_value(self, value: Any) -> datetime:
        if isinstance(value, str):
            # An unencoded "+" in a query string arrives as a space.
            value = _OFFSET_AFTER_SPACE.sub(r"+\1", value.strip())
            try:
                parsed = parse_datetime(value)
            except ValueError:
                parsed = None  # well formed but impossible: the parent reports the format
            if parsed is not None and parsed.tzinfo is None:
                raise serializers.ValidationError(
                    "Give a UTC offset, e.g. 2025-01-31T12:00:00Z or …+02:00."
                )
        return super().to_internal_value(value)


class StepField(serializers.Field):
    """Seconds, or a number with s, m, h or d: ``300``, ``5m``, ``1h``."""

    def to_internal_value(self, data: Any) -> int:
        match = _STEP.match(str(data).strip()) if isinstance(data, str | int) else None
        if not match:
            raise serializers.ValidationError("Use seconds or a duration such as 30s, 5m, 1h, 1d.")
        seconds = int(match[1]) * _STEP_UNITS[match[2]]
        if not 10 <= seconds <= MAX_WINDOW_SECONDS:
            raise serializers.ValidationError("Must be between 10 seconds and 90 days.")
        return seconds

    def to_representation(self, value: int) -> int:
        return value


class WindowInput(serializers.Serializer):
    window = serializers.ChoiceField(choices=list(WINDOWS), required=False)
    # "from" is a keyword: the fields are declared in the class namespace directly.
    locals()["from"] = Rfc3339Field(required=False)
    to = Rfc3339Field(required=False)

    def bounds(self) -> tuple[int, int]:
        data = self.validated_data
        return requested_bounds(
            window=data.get("window"), start=data.get("from"), end=data.get("to")
        )


# --- Percentiles and series -------------------------------------------------------------------


def window_data(window: Window) -> dict[str, Any]:
    return {
        "from": to_datetime(window.start),
        "to": to_datetime(window.end),
        "requested": {
            "from": to_datetime(window.requested_start),
            "to": to_datetime(window.requested_end),
        },
        "widened": {"before_s": window.widened_before, "after_s": window.widened_after},
    }


STATUSES = ["ok", "over", "no_data"]


# A pattern rather than an enum: the e2e and stage outputs share the choice set, and
# the schema's enum naming cannot give a set used by two components a stable name.
@extend_schema_field({"type": "string", "pattern": f"^({'|'.join(STATUSES)})$", "example": "ok"})
class StatusField(serializers.CharField):
    """``ok``, ``over`` (a budgeted percentile above its budget) or ``no_data``."""


class _Bounds(serializers.Serializer):
    locals()["from"] = serializers.DateTimeField()
    to = serializers.DateTimeField()

    class Meta:
        ref_name = "RollupWindowBounds"


class _Widened(serializers.Serializer):
    before_s = serializers.IntegerField(help_text="Seconds added before the requested from.")
    after_s = serializers.IntegerField(help_text="Seconds added after the requested to.")

    class Meta:
        ref_name = "RollupWindowWidened"


class WindowOutput(serializers.Serializer):
    pipeline = serializers.CharField()
    locals()["from"] = serializers.DateTimeField(help_text="Effective start of the data.")
    to = serializers.DateTimeField(help_text="Effective end (exclusive) of the data.")
    requested = _Bounds(help_text="The window asked for, aligned to 10 s.")
    widened = _Widened(
        help_text="Where fine buckets are no longer kept, whole coarser buckets are used."
    )


def _distribution_fields() -> dict[str, serializers.Field]:
    percentiles = {
        name: serializers.FloatField(allow_null=True, help_text=f"{name} in ms; null: no data.")
        for name in QUANTILES
    }
    return {
        "count": serializers.IntegerField(),
        "errors": serializers.IntegerField(),
        **percentiles,
        "max": serializers.FloatField(allow_null=True),
        "budget": serializers.DictField(
            child=serializers.IntegerField(), allow_null=True, help_text="ms by percentile."
        ),
        "status": StatusField(help_text="ok, over (a budgeted percentile above it) or no_data."),
    }


class E2eOutput(serializers.Serializer):
    locals().update(_distribution_fields())

    class Meta:
        ref_name = "PercentilesEndToEnd"


class StageCriticalPathOutput(serializers.Serializer):
    share = serializers.FloatField(
        allow_null=True, help_text="Its critical-path time over all end-to-end time."
    )
    mean_ms = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "PercentilesStageCriticalPath"


class StagePercentilesOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    locals().update(_distribution_fields())
    critical_path = StageCriticalPathOutput()

    class Meta:
        ref_name = "PercentilesStage"


class UntrackedCriticalPathOutput(serializers.Serializer):
    share = serializers.FloatField(allow_null=True)
    mean_ms = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "PercentilesUntrackedCriticalPath"


class UntrackedOutput(serializers.Serializer):
    critical_path = UntrackedCriticalPathOutput()

    class Meta:
        ref_name = "PercentilesUntracked"


class PercentilesOutput(WindowOutput):
    e2e = E2eOutput()
    stages = StagePercentilesOutput(many=True)
    untracked = UntrackedOutput()

    class Meta:
        ref_name = "PipelinePercentiles"


class PointOutput(serializers.Serializer):
    t = serializers.DateTimeField(help_text="Start of the point's step.")
    value = serializers.FloatField(allow_null=True, help_text="ms; null: no data.")
    count = serializers.IntegerField()

    class Meta:
        ref_name = "SeriesPoint"


class SeriesOutput(WindowOutput):
    stage = serializers.CharField(help_text="A stage slug, or e2e.")
    measure = serializers.ChoiceField(choices=TIME_MEASURE_LABELS)
    p = serializers.IntegerField()
    step_s = serializers.IntegerField()
    resolution_s = serializers.IntegerField(help_text="Width of the stored buckets used.")
    points = PointOutput(many=True)

    class Meta:
        ref_name = "PipelineSeries"


def percentiles_data(result: PipelinePercentiles) -> dict[str, Any]:
    e2e = result.e2e
    return {
        "pipeline": result.pipeline.slug,
        **window_data(result.window),
        "e2e": {
            "count": e2e.count,
            "errors": e2e.errors,
            **result.e2e_percentiles,
            "max": e2e.max_ms,
            "budget": result.pipeline.budget or None,
            "status": result.e2e_status,
        },
        "stages": [
            {
                "slug": item.stage.slug,
                "name": item.stage.name,
                "count": item.wall.count,
                "errors": item.wall.errors,
                **item.percentiles,
                "max": item.wall.max_ms,
                "budget": item.stage.budget or None,
                "status": item.status,
                "critical_path": {
                    "share": item.share,
                    "mean_ms": item.critical.mean_ms,
                    "p95": item.critical.percentile("p95"),
                },
            }
            for item in result.stages
        ],
        "untracked": {
            "critical_path": {
                "share": result.untracked_share,
                "mean_ms": result.untracked.mean_ms,
            }
        },
    }


# --- Percentiles and series: examples for the schema ------------------------------------------

_WINDOW_EXAMPLE = {
    "from": "2025-01-31T11:00:00Z",
    "to": "2025-01-31T12:00:00Z",
    "requested": {"from": "2025-01-31T11:00:00Z", "to": "2025-01-31T12:00:00Z"},
    "widened": {"before_s": 0, "after_s": 0},
}
PERCENTILES_EXAMPLE = {
    "pipeline": "rag-chat",
    **_WINDOW_EXAMPLE,
    "e2e": {"count": 1234, "errors": 3, "p50": 812.0, "p90": 1403.2, "p95": 1710.9,
            "p99": 2390.4, "max": 3120.0, "budget": {"p95": 2500}, "status": "ok"},
    "stages": [
        {"slug": "retrieval", "name": "Vector retrieval", "count": 1230, "errors": 0,
         "p50": 183.0, "p90": 301.2, "p95": 352.3, "p99": 470.9, "max": 620.1,
         "budget": {"p95": 350}, "status": "over",
         "critical_path": {"share": 0.096, "mean_ms": 190.2, "p95": 340.0}},
        {"slug": "rerank", "name": "Rerank", "count": 0, "errors": 0,
         "p50": None, "p90": None, "p95": None, "p99": None, "max": None,
         "budget": {"p95": 80}, "status": "no_data",
         "critical_path": {"share": 0.0, "mean_ms": None, "p95": None}},
    ],
    "untracked": {"critical_path": {"share": 0.005, "mean_ms": 9.1}},
}  # fmt: skip
SERIES_EXAMPLE = {
    "pipeline": "rag-chat",
    **_WINDOW_EXAMPLE,
    "stage": "retrieval",
    "measure": "wall",
    "p": 95,
    "step_s": 30,
    "resolution_s": 10,
    "points": [
        {"t": "2025-01-31T11:00:00Z", "value": 341.7, "count": 12},
        {"t": "2025-01-31T11:00:30Z", "value": None, "count": 0},
    ],
}


# --- Fit --------------------------------------------------------------------------------------


class FitEndToEndOutput(serializers.Serializer):
    percentile = serializers.ChoiceField(choices=Percentile.choices)
    budget_ms = serializers.IntegerField(help_text="The headline end-to-end budget.")
    observed_ms = serializers.FloatField(allow_null=True, help_text="Observed at that percentile.")
    over_budget = serializers.IntegerField(help_text="Traces over the end-to-end budget.")
    share_over_budget = serializers.FloatField(allow_null=True)
    expected_share = serializers.FloatField(help_text="1 - percentile.")
    inconsistent = serializers.IntegerField(
        help_text="Traces where every budgeted stage met its budget, yet the end-to-end "
        "time exceeded the end-to-end budget."
    )
    share_inconsistent = serializers.FloatField(allow_null=True)
    untracked_ms = serializers.FloatField(
        allow_null=True, help_text="Critical-path time in no stage, at the same percentile."
    )
    met = serializers.BooleanField(
        allow_null=True,
        help_text="Whether the stages, as observed, can meet the end-to-end budget: the "
        "untracked time plus their observed percentiles on the critical path, and the "
        "observed end-to-end percentile, are within it. Null without traffic.",
    )
    needed_ms = serializers.FloatField(
        allow_null=True,
        help_text="The untracked time plus each stage's observed percentile times its "
        "share on the critical path.",
    )
    suggested_budget_ms = serializers.IntegerField(
        allow_null=True,
        help_text="When the budget cannot be met: one that can, the larger of what the "
        "suggested stage budgets add up to on the critical path and the observed "
        "end-to-end percentile plus headroom.",
    )

    class Meta:
        ref_name = "FitEndToEnd"


class FitStageOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    percentile = serializers.ChoiceField(choices=Percentile.choices)
    budget_ms = serializers.IntegerField(allow_null=True)
    runs = serializers.IntegerField(help_text="Traces in which the stage ran.")
    over_budget = serializers.IntegerField(allow_null=True, help_text="Runs over the budget.")
    share_over_budget = serializers.FloatField(allow_null=True, help_text="Of all traces.")
    share_of_runs_over_budget = serializers.FloatField(allow_null=True)
    expected_share = serializers.FloatField(
        help_text="1 - percentile: the share of runs a budget at that percentile allows over."
    )
    observed_ms = serializers.FloatField(allow_null=True, help_text="Wall time at the percentile.")
    critical_fraction = serializers.FloatField(
        allow_null=True, help_text="Share of the stage's wall time on the critical path."
    )
    suggested_ms = serializers.IntegerField(
        allow_null=True,
        help_text="Never below the observed percentile: observed plus headroom, the "
        "part on the critical path scaled down while the end-to-end budget can be met.",
    )
    target_ms = serializers.IntegerField(
        allow_null=True,
        help_text="When the end-to-end budget cannot be met: the budget that would keep "
        "it, below the observed percentile when the stage must get faster.",
    )

    class Meta:
        ref_name = "FitStage"


class FitOverBudgetOutput(serializers.Serializer):
    stage = serializers.CharField(allow_null=True, help_text="Null for the end to end.")
    percentile = serializers.ChoiceField(choices=Percentile.choices)
    observed_ms = serializers.FloatField()
    budget_ms = serializers.IntegerField(help_text="The budget it would have.")
    already = serializers.BooleanField(help_text="Over its budget today as well.")

    class Meta:
        ref_name = "FitOverBudget"


class FitPlanOutput(serializers.Serializer):
    # Text, not a choice: an enum would take the name "KindEnum" from the channels' kind.
    kind = serializers.CharField(
        help_text="`fit`: the suggested stage budgets, the end-to-end budget being met; "
        "`traces`: the suggested stage budgets and end-to-end budget, when the current "
        "one cannot be met; `keep`: the targets that would keep it.",
    )
    stages = serializers.DictField(
        child=serializers.IntegerField(), help_text="New budgets by stage slug."
    )
    e2e_budget_ms = serializers.IntegerField(
        allow_null=True, help_text="The new end-to-end budget at its percentile, if it changes."
    )
    over_budget = FitOverBudgetOutput(
        many=True,
        help_text="What would be over budget with these budgets, by the period's percentiles.",
    )

    class Meta:
        ref_name = "FitPlan"


class FitOutput(serializers.Serializer):
    pipeline = serializers.CharField()
    locals()["from"] = serializers.DateTimeField()
    to = serializers.DateTimeField()
    traces = serializers.IntegerField(help_text="Complete traces of the pipeline in the period.")
    headroom = serializers.FloatField(help_text="Added to observed percentiles in suggestions.")
    scale = serializers.FloatField(
        allow_null=True,
        help_text="Factor applied to the stages' critical-path parts so that they fit the "
        "end-to-end budget (1: they already fit): in the suggestions when it can be met, "
        "in the targets when it cannot; null when nothing can fit or no data.",
    )
    e2e = FitEndToEndOutput(allow_null=True, help_text="Null without an end-to-end budget.")
    stages = FitStageOutput(many=True)
    plans = FitPlanOutput(many=True, help_text="The ways to apply the suggestions.")

    class Meta:
        ref_name = "PipelineFit"


def fit_data(fit: PipelineFit) -> dict[str, Any]:
    e2e = None
    if fit.percentile is not None:
        e2e = {
            "percentile": fit.percentile,
            "budget_ms": fit.budget_ms,
            "observed_ms": fit.observed_ms,
            "over_budget": fit.over_budget,
            "share_over_budget": fit.share_over_budget,
            "expected_share": fit.expected_share,
            "inconsistent": fit.inconsistent,
            "share_inconsistent": fit.share_inconsistent,
            "untracked_ms": fit.untracked_ms,
            "met": fit.met,
            "needed_ms": fit.needed_ms,
            "suggested_budget_ms": fit.suggested_e2e_ms,
        }
    stages = [
        {**vars(stage_fit), "slug": stage_fit.stage.slug, "name": stage_fit.stage.name}
        for stage_fit in fit.stages
    ]
    plans = [
        {
            "kind": plan.kind,
            "stages": {stage.slug: ms for stage, ms in plan.changes},
            "e2e_budget_ms": plan.e2e_ms,
            "over_budget": [
                {**vars(item), "stage": item.stage.slug if item.stage else None}
                for item in plan.over
            ],
        }
        for plan in fit.plans
    ]
    return {
        "pipeline": fit.pipeline.slug,
        "from": fit.start,
        "to": fit.end,
        "traces": fit.traces,
        "headroom": HEADROOM,
        "scale": fit.scale,
        "e2e": e2e,
        "stages": stages,
        "plans": plans,
    }


# --- Objectives -------------------------------------------------------------------------------


class ObjectiveTargetOutput(serializers.Serializer):
    target = serializers.FloatField(help_text="Percent of requests to finish under the threshold.")
    threshold_ms = serializers.IntegerField()

    class Meta:
        ref_name = "ObjectiveTarget"


class ErrorBudgetOutput(serializers.Serializer):
    period_days = serializers.IntegerField()
    total = serializers.IntegerField(help_text="Complete traces in the period.")
    good = serializers.IntegerField(help_text="Those that finished under the threshold.")
    bad = serializers.IntegerField()
    allowed_bad = serializers.FloatField(help_text="(1 - target) x total.")
    remaining = serializers.FloatField(
        allow_null=True,
        help_text="(allowed bad - bad) / allowed bad: 1 untouched, 0 spent, negative "
        "overspent; null without traffic.",
    )

    class Meta:
        ref_name = "ObjectiveErrorBudget"


class BurnRateOutput(serializers.Serializer):
    window = serializers.CharField(help_text="5m, 30m, 1h, 6h or 3d.")
    seconds = serializers.IntegerField()
    total = serializers.IntegerField()
    good = serializers.IntegerField()
    bad_fraction = serializers.FloatField(allow_null=True)
    burn_rate = serializers.FloatField(
        allow_null=True,
        help_text="Bad fraction / (1 - target): 1 spends the budget exactly over 30 days.",
    )
    coverage = serializers.FloatField(
        help_text="The share of the window (0 to 1) since the pipeline's first data."
    )
    judged = serializers.BooleanField(
        help_text="Whether data covers enough of the window (BURN_RATE_MIN_COVERAGE) for "
        "its burn rate to fire an alert."
    )

    class Meta:
        ref_name = "ObjectiveBurnRate"


class ObjectiveOutput(serializers.Serializer):
    pipeline = serializers.CharField()
    objective = ObjectiveTargetOutput(allow_null=True, help_text="Null: no objective set.")
    computed_at = serializers.DateTimeField()
    error_budget = ErrorBudgetOutput(allow_null=True)
    burn_rates = BurnRateOutput(many=True)

    class Meta:
        ref_name = "PipelineObjectiveStatus"


def objective_data(slug: str, status: ObjectiveStatus | None, now: datetime) -> dict[str, Any]:
    if status is None:
        return {
            "pipeline": slug,
            "objective": None,
            "computed_at": now,
            "error_budget": None,
            "burn_rates": [],
        }
    return {
        "pipeline": slug,
        "objective": {"target": float(status.target), "threshold_ms": status.threshold_ms},
        "computed_at": status.computed_at,
        "error_budget": {
            "period_days": status.period_days,
            "total": status.total,
            "good": status.good,
            "bad": status.bad,
            "allowed_bad": status.allowed_bad,
            "remaining": status.error_budget_remaining,
        },
        "burn_rates": [vars(rate) for rate in status.burn_rates],
    }


# --- Violations -------------------------------------------------------------------------------


class ViolationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    pipeline = serializers.CharField(source="pipeline.slug")
    scope = serializers.SerializerMethodField(help_text="`e2e` or `stage`.")
    stage = serializers.CharField(
        source="stage.slug", allow_null=True, help_text="The stage's slug; null for end to end."
    )
    state = serializers.SerializerMethodField(help_text="`open` or `closed`.")
    percentile = serializers.ChoiceField(choices=Percentile.choices)
    budget_ms = serializers.IntegerField()
    observed_ms = serializers.FloatField(help_text="The percentile at the latest evaluation.")
    peak_ms = serializers.FloatField(help_text="The highest value while open.")
    sample_count = serializers.IntegerField(help_text="Samples in the latest window.")
    window_s = serializers.IntegerField(help_text="Length of the evaluation window.")
    opened_at = serializers.DateTimeField()
    last_evaluated_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)
    consecutive_ok = serializers.IntegerField(
        help_text="Evaluations in a row back under budget; the pipeline's `close_after` closes it."
    )
    example_trace_ids = serializers.ListField(
        child=serializers.CharField(), help_text="The slowest traces of the worst window, hex."
    )

    class Meta:
        ref_name = "Violation"

    def get_scope(self, violation: Violation) -> str:
        return "stage" if violation.stage_id else E2E

    def get_state(self, violation: Violation) -> str:
        return OPEN if violation.closed_at is None else CLOSED
