"""Serializers of the what-if API: the questions, then the answers' shapes (for the schema
and to keep every answer to it), then saved scenarios."""

from typing import Any

from rest_framework import serializers

from apps.core.percentiles import QUANTILES
from apps.rollups.apis.serializers import E2eOutput as PercentilesE2eOutput
from apps.rollups.apis.serializers import (
    StageCriticalPathOutput,
    StatusField,
    UntrackedOutput,
    WindowInput,
)
from apps.whatif.changes import MAX_CHANGES, MAX_FACTOR, MAX_MS, OPS
from apps.whatif.levers import DEFAULT_HIT_RATIO
from apps.whatif.selectors.sample import DEFAULT_TRACES, MAX_TRACES

PERCENTILE_NAMES = list(QUANTILES)

# --- Questions --------------------------------------------------------------------------------


class ChangeInput(serializers.Serializer):
    stage = serializers.CharField(max_length=50, help_text="The stage's slug.")
    op = serializers.ChoiceField(choices=OPS)
    factor = serializers.FloatField(
        required=False, min_value=0, max_value=MAX_FACTOR, help_text="scale: the factor."
    )
    ms = serializers.FloatField(
        required=False,
        min_value=-MAX_MS,
        max_value=MAX_MS,
        help_text="shift: milliseconds to add (negative: take off); cap: the cap.",
    )
    hit_ratio = serializers.FloatField(
        required=False, min_value=0, max_value=1, help_text="cache: share of traces that hit."
    )
    hit_ms = serializers.FloatField(
        required=False, min_value=0, max_value=MAX_MS, help_text="cache: a hit's time."
    )
    # "with" is a keyword: the field is declared in the class namespace directly.
    locals()["with"] = serializers.CharField(
        required=False, max_length=50, help_text="parallel: the other stage's slug."
    )
    at = serializers.ChoiceField(
        choices=["budget"], required=False, help_text="cap: at the stage's budget."
    )

    class Meta:
        ref_name = "WhatIfChange"


class WhatIfInput(WindowInput):
    percentile = serializers.ChoiceField(
        choices=PERCENTILE_NAMES, default="p95", help_text="The headline percentile."
    )
    traces = serializers.IntegerField(
        min_value=100,
        max_value=MAX_TRACES,
        default=DEFAULT_TRACES,
        help_text="How many of the window's traces to replay (a reproducible sample).",
    )
    changes = serializers.ListField(child=ChangeInput(), max_length=MAX_CHANGES)


class LeversInput(WindowInput):
    percentile = serializers.ChoiceField(choices=PERCENTILE_NAMES, default="p95")
    traces = serializers.IntegerField(min_value=100, max_value=MAX_TRACES, default=DEFAULT_TRACES)
    hit_ratio = serializers.FloatField(
        min_value=0.01,
        max_value=1,
        default=DEFAULT_HIT_RATIO,
        help_text="For cache levers: the share of the slow requests served the fast way.",
    )


# --- Answers ----------------------------------------------------------------------------------


def _percentile_fields() -> dict[str, serializers.Field]:
    return {
        name: serializers.FloatField(allow_null=True, help_text=f"{name} in ms; null: no data.")
        for name in QUANTILES
    }


class IntervalsOutput(serializers.Serializer):
    locals().update(
        {
            name: serializers.ListField(
                child=serializers.FloatField(allow_null=True),
                min_length=2,
                max_length=2,
                help_text=f"The 95 % bootstrap interval of {name}, ms: [low, high].",
            )
            for name in QUANTILES
        }
    )

    class Meta:
        ref_name = "WhatIfIntervals"


class ObjectiveOutput(serializers.Serializer):
    target = serializers.FloatField(help_text="Percent of requests.")
    threshold_ms = serializers.IntegerField()
    share = serializers.FloatField(allow_null=True, help_text="Share of requests under it.")
    met = serializers.BooleanField(allow_null=True)

    class Meta:
        ref_name = "WhatIfObjective"


class E2eOutput(PercentilesE2eOutput):
    """The percentiles API's end-to-end figures, with what a what-if adds."""

    mean = serializers.FloatField(allow_null=True)
    intervals = IntervalsOutput()
    within_budget = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="Per budgeted percentile: the share of requests within its budget.",
    )
    objective = ObjectiveOutput(allow_null=True)

    class Meta:
        ref_name = "WhatIfEndToEnd"


class StageOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    count = serializers.IntegerField(help_text="Replayed traces with a span in the stage.")
    locals().update(_percentile_fields())
    max = serializers.FloatField(allow_null=True)
    budget = serializers.DictField(child=serializers.IntegerField(), allow_null=True)
    status = StatusField()
    intervals = IntervalsOutput()
    critical_path = StageCriticalPathOutput()

    class Meta:
        ref_name = "WhatIfStage"


class SideOutput(serializers.Serializer):
    e2e = E2eOutput()
    stages = StageOutput(many=True)
    untracked = UntrackedOutput()

    class Meta:
        ref_name = "WhatIfSide"


class _Bounds(serializers.Serializer):
    locals()["from"] = serializers.DateTimeField()
    to = serializers.DateTimeField()

    class Meta:
        ref_name = "WhatIfWindow"


class ChangeOutput(serializers.Serializer):
    stage = serializers.CharField()
    op = serializers.CharField()
    factor = serializers.FloatField(required=False)
    ms = serializers.FloatField(required=False)
    hit_ratio = serializers.FloatField(required=False)
    hit_ms = serializers.FloatField(required=False)
    locals()["with"] = serializers.CharField(required=False)
    at = serializers.CharField(required=False)

    class Meta:
        ref_name = "WhatIfChangeOut"


class HeadlineOutput(serializers.Serializer):
    before_ms = serializers.FloatField(allow_null=True)
    after_ms = serializers.FloatField(allow_null=True)
    saving_ms = serializers.FloatField(allow_null=True, help_text="Negative: slower.")
    saving_pct = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "WhatIfHeadline"


class DistributionOutput(serializers.Serializer):
    edges_ms = serializers.ListField(child=serializers.FloatField())
    before = serializers.ListField(child=serializers.IntegerField())
    after = serializers.ListField(child=serializers.IntegerField())

    class Meta:
        ref_name = "WhatIfDistribution"


class _RunFields(serializers.Serializer):
    run = serializers.IntegerField(help_text="The run's id: the same question reuses it.")
    status = serializers.CharField(help_text="done")
    traces = serializers.IntegerField(help_text="Traces replayed.")
    traces_in_window = serializers.IntegerField()
    left_out = serializers.IntegerField(
        help_text="Sampled traces past the span or byte budget of one replay."
    )
    left_out_by = serializers.ChoiceField(
        choices=["spans", "bytes", ""],
        default="",
        help_text="The budget that left traces out: WHATIF_MAX_SPANS or WHATIF_MAX_BYTES.",
    )
    spans = serializers.IntegerField(default=None, allow_null=True, help_text="Spans read.")
    bytes_read = serializers.IntegerField(
        default=None,
        allow_null=True,
        help_text="Bytes read: span skeletons and the attributes the rules compare.",
    )
    window = _Bounds()
    percentile = serializers.ChoiceField(choices=PERCENTILE_NAMES)


class WhatIfOutput(_RunFields):
    changes = ChangeOutput(many=True)
    headline = HeadlineOutput(help_text="The end-to-end percentile asked for.")
    before = SideOutput()
    after = SideOutput()
    distribution = DistributionOutput(help_text="End-to-end times over the same bins.")

    class Meta:
        ref_name = "WhatIfResult"


class SensitivityOutput(serializers.Serializer):
    stage = serializers.CharField()
    name = serializers.CharField()
    traces = serializers.IntegerField()
    saving_10pct_ms = serializers.FloatField(help_text="If each span were 10 % faster.")
    saving_100ms_ms = serializers.FloatField(help_text="If each span were 100 ms faster.")
    changes_10pct = ChangeOutput(many=True)
    changes_100ms = ChangeOutput(many=True)

    class Meta:
        ref_name = "WhatIfSensitivity"


class LeverOutput(serializers.Serializer):
    kind = serializers.CharField(help_text="concurrent or cache")
    stage = serializers.CharField()
    title = serializers.CharField()
    detail = serializers.CharField()
    saving_ms = serializers.FloatField()
    changes = ChangeOutput(many=True)

    class Meta:
        ref_name = "WhatIfLever"


class LeversOutput(_RunFields):
    base_ms = serializers.FloatField(help_text="The end-to-end percentile as observed.")
    sensitivity = SensitivityOutput(many=True)
    levers = LeverOutput(many=True)

    class Meta:
        ref_name = "WhatIfLevers"


class RunPendingOutput(serializers.Serializer):
    run = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["pending", "running"])
    poll = serializers.CharField(help_text="GET this until it answers 200.")
    retry_after_s = serializers.IntegerField()

    class Meta:
        ref_name = "WhatIfRunPending"


def run_data(run: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"run": run.pk, "status": run.status, **result}


# --- Saved scenarios --------------------------------------------------------------------------


class ScenarioInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    changes = serializers.ListField(child=ChangeInput(), min_length=1, max_length=MAX_CHANGES)

    class Meta:
        ref_name = "WhatIfScenarioInput"


class ScenarioOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    changes = ChangeOutput(many=True)
    created_by = serializers.CharField(allow_null=True, source="created_by.username", default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    url = serializers.CharField(help_text="The pipeline's what-if page with these changes.")

    class Meta:
        ref_name = "WhatIfScenario"


WAIT_NOTE = (
    "The replay runs in a worker and the request never waits for it: 200 with the answer "
    "when the same question was answered before, otherwise 202 at once, naming the run "
    "to poll."
)
