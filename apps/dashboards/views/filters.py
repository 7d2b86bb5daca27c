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
from apps.pipelines.models import Pipeline

MAX_DURATION_MS = 3_600_000


class TraceFilterForm(forms.Form):
    pipeline = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *TraceStatus.choices])
    min_duration_ms = forms.IntegerField(
        label="Min duration (ms)", required=False, min_value=0, max_value=MAX_DURATION_MS
    )
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
