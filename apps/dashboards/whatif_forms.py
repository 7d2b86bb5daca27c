"""The what-if page's controls: the window, the percentile, and one change to add.

The scenario itself lives in the URL (one ``change`` parameter per change), so a page
is shareable as it is; the form only turns one new change into its compact text.
"""

from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError

from apps.core.percentiles import QUANTILES
from apps.dashboards.ranges import DEFAULT_WINDOW, WHATIF_WINDOWS
from apps.pipelines.models import Stage
from apps.whatif.changes import CACHE, CAP, PARALLEL, REMOVE, SCALE, SHIFT, Change, change_from_data

CAP_AT_BUDGET = "cap_budget"
OP_CHOICES = [
    (SCALE, "scale by a factor"),
    (SHIFT, "add or take off ms (each span)"),
    (CACHE, "cache: hit ratio, and ms a hit takes"),
    (PARALLEL, "run concurrently with…"),
    (REMOVE, "remove (precompute or skip)"),
    (CAP, "cap each span at ms (degrade)"),
    (CAP_AT_BUDGET, "cap each span at its budget"),
]


class ScenarioForm(forms.Form):
    """What the page shows: its window and percentile, and the changes already chosen."""

    window = forms.ChoiceField(
        choices=[(key, window.label) for key, window in WHATIF_WINDOWS.items()], required=False
    )
    p = forms.ChoiceField(choices=[(p, p) for p in QUANTILES], required=False)

    def chosen(self) -> tuple[str, str]:
        data = self.cleaned_data if self.is_valid() else {}
        return data.get("window") or DEFAULT_WINDOW, data.get("p") or "p95"


class AddChangeForm(forms.Form):
    """One change to add, as people think of it: a stage, what to do, and how much."""

    stage = forms.ChoiceField()
    op = forms.ChoiceField(choices=OP_CHOICES, label="Change")
    amount = forms.FloatField(
        required=False, help_text="The factor, the ms, or the hit ratio (0 to 1)."
    )
    hit_ms = forms.FloatField(required=False, label="A hit takes (ms)")
    other = forms.ChoiceField(required=False, label="Concurrently with")

    def __init__(self, *args: Any, stages: list[Stage], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stages = {stage.slug: stage for stage in stages}
        choices = [(stage.slug, stage.name) for stage in stages]
        cast(forms.ChoiceField, self.fields["stage"]).choices = choices
        cast(forms.ChoiceField, self.fields["other"]).choices = [("", "—"), *choices]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        op, amount = data["op"], data.get("amount")
        raw: dict[str, Any] = {"stage": data["stage"], "op": op}
        needs = {SCALE: "factor", SHIFT: "ms", CAP: "ms"}
        if op in needs:
            if amount is None:
                raise ValidationError(f"Give the {needs[op]} in the amount.")
            raw[needs[op]] = amount
        elif op == CACHE:
            if amount is None or data.get("hit_ms") is None:
                raise ValidationError("A cache takes a hit ratio (amount) and what a hit takes.")
            raw.update(hit_ratio=amount, hit_ms=data["hit_ms"])
        elif op == PARALLEL:
            raw["with"] = data.get("other") or ""
        elif op == CAP_AT_BUDGET:
            raw = {"stage": data["stage"], "op": CAP, "at": "budget"}
        elif op != REMOVE:
            raise ValidationError("Choose a change.")
        data["change"] = change_from_data(raw, stages=self.stages, where="This change")
        return data

    def change(self) -> Change:
        change: Change = self.cleaned_data["change"]
        return change


class SaveScenarioForm(forms.Form):
    name = forms.CharField(max_length=100)
