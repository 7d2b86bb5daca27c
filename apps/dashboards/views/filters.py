"""Query-string forms of the trace explorer; invalid values come back as inline errors."""

from typing import Any

from django import forms

from apps.ingest.selectors import (
    DEFAULT_WINDOW,
    UNMATCHED,
    WINDOWS,
    TraceCursor,
    TraceFilters,
    TraceStatus,
)
from apps.pipelines.models import Pipeline, Stage

MAX_DURATION_MS = 3_600_000


class TraceFilterForm(forms.Form):
    pipeline = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *TraceStatus.choices])
    min_duration_ms = forms.IntegerField(
        label="Min duration (ms)", required=False, min_value=0, max_value=MAX_DURATION_MS
    )
    stage = forms.ChoiceField(required=False)
    stage_over_budget = forms.BooleanField(required=False, label="Stage over its budget")
    min_critical_share = forms.IntegerField(
        label="Stage on the critical path at least (%)", required=False, min_value=1,
        max_value=100,
    )  # fmt: skip
    cursor = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)

    def __init__(self, *args: Any, pipelines: list[Pipeline], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipelines = {pipeline.slug: pipeline for pipeline in pipelines}
        self.fields["pipeline"] = forms.ChoiceField(
            required=False,
            choices=[
                ("", "all pipelines"),
                (UNMATCHED, "no pipeline (unmatched)"),
                *((p.slug, p.name) for p in pipelines),
            ],
        )
        self.stages = {
            (pipeline.slug, stage.slug): stage
            for pipeline in pipelines
            for stage in pipeline.stages.all()
        }
        stage_field = self.fields["stage"]
        assert isinstance(stage_field, forms.ChoiceField)
        stage_field.choices = [
            ("", "any stage"),
            *sorted({(key[1], stage.name) for key, stage in self.stages.items()}),
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        stage, pipeline = data.get("stage"), data.get("pipeline")
        narrowing = data.get("stage_over_budget") or data.get("min_critical_share")
        if narrowing and not stage:
            self.add_error("stage", "Pick the stage to filter on.")
        elif stage and (not pipeline or pipeline == UNMATCHED):
            self.add_error("stage", "Pick the pipeline of the stage first.")
        elif stage and (pipeline, stage) not in self.stages:
            self.add_error("stage", "That pipeline has no such stage.")
        return data

    def stage_filter(self) -> tuple[Stage, bool, float | None] | None:
        """The stage to narrow to, whether over its budget, and the least critical share."""
        data = self.cleaned_data
        if not data.get("stage"):
            return None
        stage = self.stages[(data["pipeline"], data["stage"])]
        share = data.get("min_critical_share")
        return stage, bool(data.get("stage_over_budget")), share / 100 if share else None

    def clean_cursor(self) -> TraceCursor | None:
        text = self.cleaned_data["cursor"]
        if not text:
            return None
        try:
            return TraceCursor.decode(text)
        except ValueError:
            raise forms.ValidationError(
                "This page link is damaged; start from the newest."
            ) from None

    def filters(self) -> TraceFilters:
        data = self.cleaned_data
        slug = data.get("pipeline") or ""
        return TraceFilters(
            pipeline=self.pipelines.get(slug) if slug != UNMATCHED else None,
            unmatched=slug == UNMATCHED,
            status=data.get("status") or "",
            min_duration_ms=data.get("min_duration_ms"),
        )


class WindowForm(forms.Form):
    window = forms.ChoiceField(
        required=False, choices=[(key, f"last {key}") for key in WINDOWS], initial=DEFAULT_WINDOW
    )

    @property
    def window_key(self) -> str:
        if self.is_valid():
            return self.cleaned_data["window"] or DEFAULT_WINDOW
        return DEFAULT_WINDOW
