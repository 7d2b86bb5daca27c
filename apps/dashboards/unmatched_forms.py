"""The unmatched spans page's window, and the rule form it opens pre-filled.

The rule form is the stage editor's (same fields, same checks on save), with the stage
to add the rule to as a field of its own: a group of spans may belong to any stage.
"""

from collections import Counter
from typing import Any

from django import forms
from django.http import QueryDict

from apps.analysis.rule_suggestions import RuleSuggestion
from apps.analysis.selectors.unmatched_spans import DEFAULT_WINDOW, WINDOWS
from apps.analysis.stage_matching import DEFAULT_FIRST_TOKEN_EVENT, RuleSpec
from apps.dashboards.ranges import CUSTOM, Range
from apps.pipelines.forms import SpanRuleForm, attributes_to_lines
from apps.pipelines.models import NameMatch, Pipeline, Portion, Stage

WINDOW_CHOICES = [(key, window.last) for key, window in WINDOWS.items()]


class UnmatchedWindowForm(forms.Form):
    window = forms.ChoiceField(required=False, choices=WINDOW_CHOICES)

    @property
    def window_key(self) -> str:
        """The window asked for; none, or one not offered, is the default."""
        if self.is_valid():
            return self.cleaned_data["window"] or DEFAULT_WINDOW
        return DEFAULT_WINDOW


def window_for_range(range_: Range) -> str:
    """The unmatched spans window nearest a dashboard's range: spans are kept for days,
    so a longer range reads the longest window, a custom one the default."""
    if range_.window in WINDOWS:
        return range_.window
    return DEFAULT_WINDOW if range_.window == CUSTOM else "7d"


def suggestion_query(suggestion: RuleSuggestion) -> dict[str, str]:
    """The rule form's fields for a suggested rule (the stage comes from the page's select)."""
    if suggestion.attribute is not None:
        key, value = suggestion.attribute
        return {"attributes": attributes_to_lines({key: value}), "name_match": "glob"}
    return {"span_name": suggestion.span_name, "name_match": "glob"}


def _stage_portion(stage: Stage) -> tuple[str, str] | None:
    """The portion and first-token event the stage's rules share, when they share one:
    a rule for a stage that takes the time to first token should too."""
    found = Counter((rule.portion, rule.first_token_event) for rule in stage.rules.all())
    if len(found) != 1:
        return None
    return next(iter(found))


class UnmatchedRuleForm(SpanRuleForm):
    """A span rule and its stage. A link gives the rule's conditions only: the name is a
    glob unless it says otherwise, and the portion is the one the stage's rules share, else
    the whole span."""

    stage = forms.ChoiceField(label="Stage")
    # The window of the page the form came from, to go back to after saving.
    window = forms.ChoiceField(required=False, choices=WINDOW_CHOICES, widget=forms.HiddenInput)

    field_order = ["stage"]

    def __init__(self, data: QueryDict | None, *, pipeline: Pipeline, **kwargs: Any) -> None:
        self.stages = {stage.slug: stage for stage in pipeline.stages.all()}
        if data is not None and not {"name_match", "portion"} <= set(data):
            stage = self.stages.get(data.get("stage") or "")
            shared = None if stage is None else _stage_portion(stage)
            portion, event = shared or (Portion.WHOLE, DEFAULT_FIRST_TOKEN_EVENT)
            data = data.copy()
            data.setdefault("name_match", NameMatch.GLOB)
            if "portion" not in data:
                data["portion"], data["first_token_event"] = portion, event
        super().__init__(data, **kwargs)
        choices = [(stage.slug, stage.name) for stage in self.stages.values()]
        stage_field = self.fields["stage"]
        assert isinstance(stage_field, forms.ChoiceField)
        stage_field.choices = choices

    @property
    def chosen_stage(self) -> Stage:
        return self.stages[self.cleaned_data["stage"]]

    def rule_fields(self) -> dict[str, Any]:
        """What ``span_rule_create`` takes."""
        return {name: self.cleaned_data[name] for name in SpanRuleForm.base_fields}

    def spec(self) -> RuleSpec:
        return RuleSpec(**self.rule_fields())

    @property
    def empty_rule(self) -> bool:
        return not any(
            self.cleaned_data[k] for k in ("span_name", "attributes", "span_kind", "service")
        )
