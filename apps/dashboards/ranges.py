"""The time range and percentile of a dashboard, read from its query string.

Every view of a dashboard is a URL: ``?window=6h&percentile=p99``, or
``?window=custom&from=…&to=…`` (UTC). Invalid values come back as inline errors and
the page falls back to the default range instead of failing.
"""

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.exceptions import ValidationError

from apps.core.percentiles import QUANTILES
from apps.core.time import to_datetime
from apps.core.windows import named_windows
from apps.rollups.selectors import DEFAULT_WINDOW, WINDOWS, requested_bounds

CUSTOM = "custom"
# The what-if page's windows: a replay samples the window's newest traces, so past a day
# it would say little about the window as a whole.
WHATIF_WINDOWS = named_windows("15m", "1h", "6h", "24h")
# Pages refresh this often while they show a window ending now.
REFRESH_SECONDS = 15


class RangeForm(forms.Form):
    window = forms.ChoiceField(
        required=False,
        choices=[*((key, window.label) for key, window in WINDOWS.items()), (CUSTOM, CUSTOM)],
    )
    percentile = forms.ChoiceField(required=False, choices=[(p, p) for p in QUANTILES])
    start = forms.DateTimeField(
        required=False,
        label="From (UTC)",
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    end = forms.DateTimeField(
        required=False,
        label="To (UTC)",
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    live = forms.ChoiceField(required=False, choices=[("1", "on"), ("0", "paused")])

    def __init__(self, data: Any, *, default_percentile: str) -> None:
        data = data.copy()
        # The query string says "from"/"to", as the REST API does.
        for ours, theirs in (("start", "from"), ("end", "to")):
            if theirs in data and ours not in data:
                data[ours] = data[theirs]
        super().__init__(data)
        self.default_percentile = default_percentile

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("window") == CUSTOM:
            start, end = data.get("start"), data.get("end")
            if start is None:
                self.add_error("start", "Give the start of a custom range.")
            elif end is not None and end <= start:
                self.add_error("end", "The end must come after the start.")
        return data


@dataclass(frozen=True)
class Range:
    window: str
    start: int
    end: int
    percentile: str
    live: bool
    errors: list[str]
    start_text: str = ""
    end_text: str = ""
    # Other state of the view that every link keeps (a table's sort).
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        if self.window == CUSTOM:
            return f"{self.start_text} to {self.end_text} UTC"
        return WINDOWS[self.window].last

    @property
    def ends_now(self) -> bool:
        return self.window != CUSTOM

    @property
    def refreshing(self) -> bool:
        return self.live and self.ends_now

    def query(self, **changes: str) -> str:
        """This view's query string with some parameters changed: links keep the state."""
        params = {"window": self.window, "percentile": self.percentile}
        if self.window == CUSTOM:
            params |= {"from": self.start_text, "to": self.end_text}
        if not self.live:
            params["live"] = "0"
        params |= dict(self.extra)
        params |= changes
        return urlencode({k: v for k, v in params.items() if v != ""})


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _text(seconds: int) -> str:
    return to_datetime(seconds).strftime("%Y-%m-%dT%H:%M")


def range_from(form: RangeForm, *, now: datetime | None = None) -> Range:
    valid = form.is_valid()
    data = form.cleaned_data if valid else {}
    errors = [str(e) for field in form.errors.values() for e in field]
    window = data.get("window") or DEFAULT_WINDOW
    percentile = data.get("percentile") or form.default_percentile
    live = data.get("live") != "0"
    if window == CUSTOM and valid:
        try:
            start, end = requested_bounds(
                start=_utc(data["start"]), end=_utc(data["end"]) if data.get("end") else None,
                now=now,
            )  # fmt: skip
        except ValidationError as exc:
            errors += [str(m) for messages in exc.message_dict.values() for m in messages]
        else:
            return Range(window, start, end, percentile, live, errors, _text(start), _text(end))
    if window == CUSTOM:
        window = DEFAULT_WINDOW
    start, end = requested_bounds(window=window, now=now)
    return Range(window, start, end, percentile, live, errors, _text(start), _text(end))
