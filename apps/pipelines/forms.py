import re
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from apps.core.percentiles import PERCENTILES
from apps.pipelines.models import (
    NameMatch,
    Percentile,
    Pipeline,
    Portion,
    SpanConditions,
    SpanKind,
    Stage,
)
from apps.pipelines.presets import PRESET_CHOICES, PresetPlan, preset_plan
from apps.pipelines.validation import EVALUATION_SETTINGS, EvaluationSetting
from apps.teams.models import slug_validator

# Paths under /pipelines/ that a pipeline slug would shadow.
RESERVED_PIPELINE_SLUGS = frozenset({"new", "unmatched"})
MAX_ATTRIBUTE_LINES = 50
INT_RE = re.compile(r"^[+-]?\d+$")
FLOAT_RE = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][+-]?\d+)$")

AttributeValue = str | int | float | bool


def parse_attribute_value(text: str) -> AttributeValue:
    """Numbers and booleans become typed values; double quotes keep a value a string."""
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if INT_RE.match(text):
        return int(text)
    if FLOAT_RE.match(text):
        return float(text)
    return text


def parse_attribute_lines(text: str) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {}
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) > MAX_ATTRIBUTE_LINES:
        raise ValidationError(f"At most {MAX_ATTRIBUTE_LINES} attributes.")
    for number, line in lines:
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ValidationError(
                f"Line {number}: write key=value, e.g. gen_ai.operation.name=chat."
            )
        if key in attributes:
            raise ValidationError(f"Line {number}: “{key}” is given twice.")
        attributes[key] = parse_attribute_value(value)
    return attributes


def format_attribute_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and parse_attribute_value(value) != value:
        return f'"{value}"'
    return str(value)


def attributes_to_lines(attributes: dict[str, Any]) -> str:
    return "\n".join(f"{key}={format_attribute_value(v)}" for key, v in attributes.items())


class AttributeLinesField(forms.CharField):
    widget = forms.Textarea(attrs={"rows": 3, "placeholder": "gen_ai.operation.name=chat"})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("max_length", 5000)
        kwargs.setdefault("help_text", "One key=value per line; numbers and true/false are typed.")
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        return attributes_to_lines(value) if isinstance(value, dict) else value

    def clean(self, value: Any) -> dict[str, AttributeValue]:
        return parse_attribute_lines(super().clean(value) or "")


def budget_field(percentile: str) -> forms.IntegerField:
    return forms.IntegerField(
        label=f"{percentile} (ms)", required=False, min_value=1, max_value=3_600_000
    )


EVALUATION = {setting.field: setting for setting in EVALUATION_SETTINGS}


class EvaluationField(forms.IntegerField):
    """A budget-evaluation setting; left empty, it takes the default."""

    def __init__(self, setting: EvaluationSetting, *, help_text: str, **kwargs: Any) -> None:
        self.setting = setting
        super().__init__(
            help_text=f"{help_text} {setting.minimum} to {setting.maximum}; "
            f"empty means {setting.default}.",
            required=False,
            min_value=setting.minimum,
            max_value=setting.maximum,
            initial=setting.default,
            widget=forms.NumberInput(attrs={"placeholder": setting.default}),
            **kwargs,
        )

    def clean(self, value: Any) -> int:
        cleaned = super().clean(value)
        return self.setting.default if cleaned is None else int(cleaned)


class PipelineForm(forms.Form):
    name = forms.CharField(max_length=100)
    slug = forms.CharField(
        max_length=50,
        validators=[slug_validator],
        help_text="Lowercase letters, digits and hyphens; used in URLs and the API.",
    )
    description = forms.CharField(
        required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2})
    )
    match_service = forms.CharField(label="service.name", required=False, max_length=200)
    match_root_span = forms.CharField(label="Root span name (glob)", required=False, max_length=200)
    match_attributes = AttributeLinesField(label="Root span attributes")
    budget_p50_ms = budget_field("p50")
    budget_p90_ms = budget_field("p90")
    budget_p95_ms = budget_field("p95")
    budget_p99_ms = budget_field("p99")
    objective_target = forms.DecimalField(
        label="Objective: % of requests",
        required=False,
        min_value=1,
        max_value=Decimal("99.999"),
        max_digits=6,
        decimal_places=3,
    )
    objective_threshold_ms = forms.IntegerField(
        label="under (ms)", required=False, min_value=1, max_value=3_600_000
    )
    evaluation_window_s = EvaluationField(
        EVALUATION["evaluation_window_s"],
        label="Window (seconds)",
        help_text="Percentiles are checked over this many seconds of recent traces.",
    )
    min_samples = EvaluationField(
        EVALUATION["min_samples"],
        label="Minimum samples",
        help_text="With fewer traces than this in the window there is no verdict, so a "
        "quiet spell neither opens nor closes a violation.",
    )
    close_after = EvaluationField(
        EVALUATION["close_after"],
        label="Close after",
        help_text="Evaluations in a row back under budget (one every 10 s) before "
        "a violation closes.",
    )

    def clean_slug(self) -> str:
        slug: str = self.cleaned_data["slug"]
        if slug in RESERVED_PIPELINE_SLUGS:
            raise ValidationError("“%(slug)s” is reserved; choose another.", params={"slug": slug})
        return slug

    @classmethod
    def initial_for(cls, pipeline: Pipeline) -> dict[str, Any]:
        return {name: getattr(pipeline, name) for name in PipelineForm.base_fields}

    def service_kwargs(self) -> dict[str, Any]:
        """The cleaned data in the shape pipeline_create and pipeline_update take."""
        data = {name: self.cleaned_data[name] for name in PipelineForm.base_fields}
        budget = {p: data.pop(f"budget_{p}_ms") for p in PERCENTILES}
        data["budget"] = {p: ms for p, ms in budget.items() if ms is not None}
        return data


class PipelineCreateForm(PipelineForm):
    preset = forms.ChoiceField(
        label="Start from",
        choices=PRESET_CHOICES,
        initial="blank",
        widget=forms.RadioSelect,
    )

    field_order = ["preset"]


class PresetPreviewForm(forms.Form):
    """The preset and end-to-end budget the creation form's preview shows: the fields
    of the creation form that decide what a preset creates, read leniently (a budget
    that is no number is simply not there yet)."""

    preset = forms.ChoiceField(choices=PRESET_CHOICES)
    budget_p50_ms = budget_field("p50")
    budget_p90_ms = budget_field("p90")
    budget_p95_ms = budget_field("p95")
    budget_p99_ms = budget_field("p99")

    def plan(self) -> PresetPlan | None:
        """None without a known preset; otherwise its stages under the valid budgets."""
        self.is_valid()
        data = self.cleaned_data
        if not data.get("preset"):
            return None
        budget = {p: data[f"budget_{p}_ms"] for p in PERCENTILES if data.get(f"budget_{p}_ms")}
        return preset_plan(key=data["preset"], budget=budget)


class StageForm(forms.Form):
    name = forms.CharField(max_length=100)
    slug = forms.CharField(max_length=50, validators=[slug_validator])
    budget_ms = forms.IntegerField(
        label="Budget (ms)", required=False, min_value=1, max_value=3_600_000
    )
    budget_percentile = forms.ChoiceField(
        label="at", choices=Percentile.choices, initial=Percentile.P95
    )

    @classmethod
    def initial_for(cls, stage: Stage) -> dict[str, Any]:
        return {name: getattr(stage, name) for name in cls.base_fields}


class SpanConditionsForm(forms.Form):
    """What a span must be for a rule to take it; a no-stage rule is just that."""

    span_name = forms.CharField(
        label="Span name",
        required=False,
        max_length=500,
        help_text="A glob matches the whole name (* any run, ? one character, [a-z] one of a "
        "set); a regex, in RE2 syntax, matches anywhere in it.",
    )
    name_match = forms.ChoiceField(label="as", choices=NameMatch.choices, initial=NameMatch.GLOB)
    attributes = AttributeLinesField(label="Attributes")
    span_kind = forms.ChoiceField(label="Span kind", choices=SpanKind.choices, required=False)
    service = forms.CharField(label="Service", required=False, max_length=200)

    @classmethod
    def initial_for(cls, rule: SpanConditions) -> dict[str, Any]:
        return {name: getattr(rule, name) for name in cls.base_fields}

    @property
    def empty(self) -> bool:
        """Valid, and without any condition: such a rule would take every span."""
        return self.is_valid() and not any(
            self.cleaned_data[name] for name in ("span_name", "attributes", "span_kind", "service")
        )


NoStageRuleForm = SpanConditionsForm


class SpanRuleForm(SpanConditionsForm):
    portion = forms.ChoiceField(label="Portion", choices=Portion.choices, initial=Portion.WHOLE)
    first_token_event = forms.CharField(
        label="First-token event",
        required=False,
        max_length=100,
        initial="first_token",
        help_text="Span event marking the first token, when the span has no "
        "gen_ai.response.time_to_first_chunk.",
    )

    def clean_first_token_event(self) -> str:
        return self.cleaned_data["first_token_event"].strip() or "first_token"


class MoveForm(forms.Form):
    direction = forms.ChoiceField(choices=[("up", "up"), ("down", "down")])

    @property
    def offset(self) -> int:
        return -1 if self.cleaned_data["direction"] == "up" else 1
