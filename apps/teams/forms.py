from typing import Any

from django import forms
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator

from apps.teams.models import Role

# Paths under /teams/ that a team slug would shadow.
RESERVED_TEAM_SLUGS = frozenset({"new", "tokens"})


class LoginForm(AuthenticationForm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Django sets the username's max_length after the field is built, so it is never
        # checked: an overlong name would reach authenticate() and the lockout records.
        username = self.fields["username"]
        if isinstance(username, forms.CharField) and username.max_length is not None:
            username.validators.append(MaxLengthValidator(username.max_length))


class SignupForm(UserCreationForm):
    email = forms.EmailField(
        max_length=254, help_text="Where invitations and alert e-mails reach you."
    )

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")


class TeamCreateForm(forms.Form):
    slug = forms.CharField(
        max_length=50,
        help_text="Lowercase letters, digits and hyphens; used in URLs and the API.",
    )
    name = forms.CharField(max_length=100, required=False, help_text="Defaults to the slug.")

    def clean_slug(self) -> str:
        slug: str = self.cleaned_data["slug"].strip().lower()
        if slug in RESERVED_TEAM_SLUGS:
            raise ValidationError("“%(slug)s” is reserved; choose another.", params={"slug": slug})
        return slug


class InvitationCreateForm(forms.Form):
    # No max_length: an overlong address gets the service's one clear message.
    email = forms.CharField(
        label="E-mail address",
        widget=forms.EmailInput(attrs={"autocomplete": "off"}),
        help_text="They get a link to accept; nothing changes until they do.",
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)


class RoleChangeForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class ApiTokenCreateForm(forms.Form):
    EXPIRY_CHOICES = [("30", "in 30 days"), ("90", "in 90 days"), ("365", "in a year"),
                      ("", "never (until revoked)")]  # fmt: skip

    name = forms.CharField(
        max_length=100, help_text="Where the token is used, e.g. “CI deploy” or “laptop”."
    )
    expires = forms.ChoiceField(
        choices=EXPIRY_CHOICES,
        initial="90",
        required=False,
        help_text="A token also stops working when you change your password.",
    )

    def expires_in_days(self) -> int | None:
        value = self.cleaned_data.get("expires") or ""
        return int(value) if value else None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].widget.attrs["placeholder"] = "CI deploy"


class IngestTokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        help_text="Which service or collector sends with it, e.g. “prod collector”.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].widget.attrs["placeholder"] = "prod collector"


class MetricsTokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        help_text="Which Prometheus or agent scrapes with it, e.g. “prod prometheus”.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].widget.attrs["placeholder"] = "prod prometheus"
