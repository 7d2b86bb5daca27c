"""Query-string forms of the trace explorer; invalid values come back as inline errors."""

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.http import QueryDict

from apps.dashboards.trace_query import (
    CUSTOM,
    MAX_ATTRIBUTE_FILTERS,
    MAX_DURATION_MS,
    TraceQuery,
    parse_moment,
    trace_query_clean,
)
from apps.ingest.selectors import (
    DEFAULT_WINDOW,
    UNMATCHED,
    WINDOWS,
    TraceSort,
    TraceStatus,
)
from apps.pipelines.models import Pipeline
from apps.rollups.selectors import WINDOWS as RANGES

MOMENT_FORMAT = "%Y-%m-%dT%H:%M:%S"


def _select(choices: list[tuple[str, str]], **attrs: str) -> forms.Select:
    return forms.Select(choices=choices, attrs=attrs)


def _number(low: int, high: int) -> forms.NumberInput:
    return forms.NumberInput(attrs={"min": str(low), "max": str(high), "step": "1"})


def _moment_input() -> forms.DateTimeInput:
    return forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"})


class TraceFilterForm(forms.Form):
    """The trace list's filters as the page shows them.

    The fields only render and carry the values: ``trace_query_clean`` reads the query
    string, for this page as for the API, and its errors land on the fields here.
    """

    window = forms.CharField(required=False, label="Time range")
    pipeline = forms.CharField(required=False)
    status = forms.CharField(
        required=False, widget=_select([("", "any status"), *TraceStatus.choices])
    )
    min_duration_ms = forms.CharField(
        required=False, label="Min duration (ms)", widget=_number(0, MAX_DURATION_MS)
    )
    max_duration_ms = forms.CharField(
        required=False, label="Max duration (ms)", widget=_number(0, MAX_DURATION_MS)
    )
    stage = forms.CharField(required=False)
    stage_over_budget = forms.CharField(
        required=False, label="Stage over its budget", widget=forms.CheckboxInput
    )
    min_critical_share = forms.CharField(
        required=False, label="Critical-path share ≥ (%)", widget=_number(1, 100)
    )
    degraded = forms.CharField(
        required=False, label="Degraded by the client", widget=forms.CheckboxInput
    )
    attr = forms.CharField(required=False, label="Attribute")
    sort = forms.CharField(required=False, label="Order", widget=_select(list(TraceSort.choices)))
    cursor = forms.CharField(required=False, label="Page", widget=forms.HiddenInput)

    data: QueryDict

    def __init__(self, data: QueryDict, *, pipelines: list[Pipeline]) -> None:
        super().__init__(_moments_as_inputs(data))
        self.pipelines = pipelines
        self.query: TraceQuery | None = None
        self.fields["from"] = forms.CharField(
            required=False, label="From (UTC)", widget=_moment_input()
        )
        self.fields["to"] = forms.CharField(
            required=False, label="To (UTC)", widget=_moment_input()
        )
        self.fields["window"].widget = _select(
            [("", "any time"), *((key, window.last) for key, window in RANGES.items()),
             (CUSTOM, "custom: from / to")]
        )  # fmt: skip
        self.fields["pipeline"].widget = _select(
            [("", "all pipelines"), (UNMATCHED, "no pipeline (unmatched)"),
             *((p.slug, p.name) for p in pipelines)]
        )  # fmt: skip
        # Every stage of every pipeline: the stage is checked against the chosen pipeline.
        stages = sorted({(s.slug, s.name) for p in pipelines for s in p.stages.all()})
        self.fields["stage"].widget = _select([("", "any stage"), *stages])

    @property
    def attribute_inputs(self) -> list[str]:
        """The attribute filters asked for, and one empty input while more are allowed."""
        given = [value for value in self.data.getlist("attr") if value.strip()]
        return given + ([""] if len(given) < MAX_ATTRIBUTE_FILTERS else [])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            self.query = trace_query_clean(params=self.data, pipelines=self.pipelines)
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                for message in messages:
                    self.add_error(name if name in self.fields else None, message)
        return data


def _moments_as_inputs(data: QueryDict) -> QueryDict:
    """From and to as a datetime-local input shows them (UTC, no zone): a link may give
    RFC 3339, which the input would show empty and drop at the next change."""
    data = data.copy()
    for name in ("from", "to"):
        moment = parse_moment(data.get(name, ""))
        if moment is not None:
            data[name] = moment.strftime(MOMENT_FORMAT)
    return data


class TraceListLinks:
    """The list's URL with some parameters changed, every other one kept (the repeated
    ``attr`` too); empty parameters are left out, so links stay short."""

    def __init__(self, url: str, params: QueryDict) -> None:
        self.url = url
        self.params = params

    def with_changes(self, **changes: str) -> str:
        params = QueryDict(mutable=True)
        for key, values in self.params.lists():
            if key not in changes:
                params.setlist(key, [v for v in values if v.strip()])
        for key, value in changes.items():
            if value:
                params[key] = value
        query = params.urlencode()
        return f"{self.url}?{query}" if query else self.url


class WindowForm(forms.Form):
    window = forms.ChoiceField(
        required=False,
        choices=[(key, window.last) for key, window in WINDOWS.items()],
        initial=DEFAULT_WINDOW,
    )

    @property
    def window_key(self) -> str:
        if self.is_valid():
            return self.cleaned_data["window"] or DEFAULT_WINDOW
        return DEFAULT_WINDOW
