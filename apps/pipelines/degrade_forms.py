"""The stage editor's form for a stage's ``degrade`` policy.

The form only turns what was typed into a policy; whether that policy holds is decided
by ``degrade_policy_clean`` inside ``stage_update``, the policy's one validator, and its
messages (each starts with the key it is about) come back onto the field of that key.
"""

import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from apps.pipelines.degrade_policy import HEDGE_PERCENTILES, LEVERS, MAX_MS

ALL, CHOSEN = "all", "chosen"
FIXED = "ms"  # the hedge select's choice for a delay in milliseconds
# Longer than any number of milliseconds the policy takes; past it nothing is parsed.
MAX_TYPED = 20
WHOLE_RE = re.compile(r"^[+-]?\d+$")

LEVER_CHOICES = [
    ("skip", "skip: leave the stage out when what remains of the deadline cannot cover it"),
    ("fallback", "fallback: switch to the fallback when the first token is late"),
    ("hedge", "hedge: start a second attempt when the first runs long; the first to finish wins"),
    ("cap", "cap: cut the stage off at its allowance and use the fallback value"),
]
HEDGE_CHOICES = [
    ("", "default"),
    *((p, f"its {p}") for p in HEDGE_PERCENTILES),
    (FIXED, "a fixed time"),
]


class PolicyMsField(forms.CharField):
    """Milliseconds as typed: a whole number becomes an int, anything else stays text for
    the policy's validator to refuse by its key."""

    # Not type=number: a browser sends such a field empty when it holds no number, and
    # "abc" would quietly clear the setting instead of being refused.
    widget = forms.TextInput(attrs={"inputmode": "numeric", "autocomplete": "off"})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("max_length", MAX_TYPED)
        super().__init__(**kwargs)

    def clean(self, value: Any) -> int | str | None:
        text: str = super().clean(value)
        if not text:
            return None
        return int(text) if WHOLE_RE.match(text) else text


class PolicyChoiceField(forms.ChoiceField):
    """A choice sent as is: a value the policy does not know is left for its validator."""

    def valid_value(self, value: str) -> bool:
        return True


class LeversField(forms.MultipleChoiceField):
    """The levers ticked; a name that is no lever is left for the policy's validator."""

    widget = forms.CheckboxSelectMultiple

    def valid_value(self, value: str) -> bool:
        return True


class DegradeForm(forms.Form):
    levers_mode = forms.ChoiceField(
        label="Levers that may act",
        choices=[
            (ALL, "Every lever (the default)"),
            (CHOSEN, "Only the levers ticked; none ticked: no lever acts"),
        ],
        initial=ALL,
        widget=forms.RadioSelect,
    )
    levers = LeversField(label="Levers", choices=LEVER_CHOICES, required=False)
    # The help texts name the policy's keys: the validator's messages start with them.
    first_token_ms = PolicyMsField(
        label="First-token timeout (ms)",
        help_text="first_token_ms: how long a fallback waits. Default: the advice, else the "
        "stage's allowance.",
    )
    hedge_after = PolicyChoiceField(
        label="Hedge after",
        required=False,
        choices=HEDGE_CHOICES,
        help_text="hedge_after: the stage's p50, p95 or p99 (in the requests run without "
        "levers, once there are enough), or a fixed time. Default: the advice, else p95.",
    )
    hedge_after_ms = PolicyMsField(
        label="Hedge after (ms)", help_text="hedge_after in ms, when Hedge after is “a fixed time”."
    )
    cap_ms = PolicyMsField(
        label="Cap (ms)",
        help_text="cap_ms: the most the stage may take, clamped to the time left. Default: "
        "the advice, else the stage's budget.",
    )

    # The settings, in the order the page shows them; the bound it states for them.
    SETTINGS = ("first_token_ms", "hedge_after", "hedge_after_ms", "cap_ms")
    max_ms = MAX_MS

    @property
    def setting_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.SETTINGS]

    @classmethod
    def initial_for(cls, policy: dict[str, Any]) -> dict[str, Any]:
        levers = policy.get("levers")
        after = policy.get("hedge_after")
        return {
            "levers_mode": ALL if levers is None else CHOSEN,
            # Under "every lever" every box is ticked: the boxes say which levers act.
            "levers": list(LEVERS) if levers is None else levers,
            "first_token_ms": policy.get("first_token_ms"),
            "hedge_after": FIXED if isinstance(after, int) else after or "",
            "hedge_after_ms": after if isinstance(after, int) else None,
            "cap_ms": policy.get("cap_ms"),
        }

    def clean(self) -> dict[str, Any]:
        # Two ways to read one input would guess; the form asks instead.
        data = super().clean() or {}
        levers = data.get("levers")
        if data.get("levers_mode") == ALL and levers is not None and set(levers) != set(LEVERS):
            self.add_error(
                "levers", "To let only some levers act, choose “Only the levers ticked”."
            )
        after = data.get("hedge_after")
        if after not in ("", FIXED) and data.get("hedge_after_ms") is not None:
            self.add_error(
                "hedge_after_ms",
                "Choose “a fixed time” under Hedge after to hedge after milliseconds, "
                "or leave this empty.",
            )
        return data

    def _fixed_hedge(self) -> bool:
        after = self.cleaned_data.get("hedge_after")
        return after == FIXED or (not after and self.cleaned_data.get("hedge_after_ms") is not None)

    def policy(self) -> dict[str, Any]:
        """What was typed, in the shape ``stage_update(degrade=…)`` takes; unjudged."""
        data = self.cleaned_data
        policy: dict[str, Any] = {}
        if data["levers_mode"] == CHOSEN:
            policy["levers"] = data["levers"]
        if data["first_token_ms"] is not None:
            policy["first_token_ms"] = data["first_token_ms"]
        if self._fixed_hedge():
            policy["hedge_after"] = data["hedge_after_ms"]
        elif data["hedge_after"]:
            policy["hedge_after"] = data["hedge_after"]
        if data["cap_ms"] is not None:
            policy["cap_ms"] = data["cap_ms"]
        return policy

    def add_policy_error(self, error: ValidationError) -> None:
        """The service's error on the field of the key each message starts with, else
        above the form."""
        fields = {
            "levers": "levers",
            "first_token_ms": "first_token_ms",
            "hedge_after": "hedge_after_ms" if self._fixed_hedge() else "hedge_after",
            "cap_ms": "cap_ms",
        }
        for message in error.messages:
            self.add_error(fields.get(message.partition(":")[0]), message)
