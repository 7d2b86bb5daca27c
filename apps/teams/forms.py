from typing import Any

from django import forms
from django.contrib.auth.forms import UserCreationForm
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from apps.teams.models import Role

# Paths under /teams/ that a team slug would shadow.
RESERVED_TEAM_SLUGS = frozenset({"new", "tokens"})


def add_service_error(form: forms.Form, error: ValidationError) -> None:
    """Put a service's ValidationError on the form: on its field when the form has one."""
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for field, errors in error.error_dict.items():
        target = field if field in form.fields else None
        if field == NON_FIELD_ERRORS:
            target = None
        form.add_error(target, errors)


class SignupForm(UserCreationForm):
    email = forms.EmailField(max_length=254, help_text="Team owners can add you by this address.")

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


class MemberAddForm(forms.Form):
    identifier = forms.CharField(label="Username or email", max_length=254)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)


class RoleChangeForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class ApiTokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="Where the token is used, e.g. “CI deploy” or “laptop”."
    )

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
