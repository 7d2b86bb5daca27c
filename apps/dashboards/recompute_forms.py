"""The pipeline page's recompute control: how many hours back."""

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from apps.analysis.services.recompute import recompute_hours_clean, recompute_hours_offered


def _label(hours: int) -> str:
    if hours % 24 == 0 and hours >= 48:
        return f"{hours // 24} days"
    return "hour" if hours == 1 else f"{hours} hours"


class RecomputeForm(forms.Form):
    hours = forms.TypedChoiceField(coerce=int, label="Recompute the last")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        offered = recompute_hours_offered()
        field = self.fields["hours"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = [(hours, _label(hours)) for hours in offered]
        field.initial = min(offered[-1], 1 if len(offered) == 1 else offered[1])

    def clean_hours(self) -> int:
        try:
            return recompute_hours_clean(self.cleaned_data["hours"])
        except ValidationError as exc:
            raise ValidationError(exc.message_dict["hours"]) from None
