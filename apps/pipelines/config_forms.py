from typing import Any

from django import forms
from django.core import signing

MAX_CONFIG_BYTES = 1024 * 1024
PREVIEW_MAX_AGE_SECONDS = 60 * 60
_SALT = "pipelines.config-as-code.preview"
_TOO_BIG = "The configuration is larger than 1 MiB; split it or remove what is not needed."


class ConfigUploadForm(forms.Form):
    file = forms.FileField(required=False, label="YAML file")
    text = forms.CharField(
        required=False,
        strip=False,
        label="…or paste the YAML",
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
    )
    prune = forms.BooleanField(
        required=False,
        label=(
            "Delete this team's pipelines, channels and alert rules that the file does not "
            "list (prune)"
        ),
    )

    def clean_file(self) -> Any:
        upload = self.cleaned_data.get("file")
        if upload and upload.size > MAX_CONFIG_BYTES:
            raise forms.ValidationError(_TOO_BIG)
        return upload

    def clean_text(self) -> str:
        text: str = self.cleaned_data.get("text", "")
        if len(text.encode()) > MAX_CONFIG_BYTES:
            raise forms.ValidationError(_TOO_BIG)
        return text

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        upload, text = cleaned.get("file"), cleaned.get("text", "")
        if upload and text.strip():
            raise forms.ValidationError("Upload a file or paste text, not both.")
        if upload:
            try:
                text = upload.read().decode("utf-8-sig")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        if not text.strip():
            raise forms.ValidationError("Choose a YAML file or paste its text.")
        cleaned["document"] = text
        return cleaned


def preview_token(*, team_slug: str, text: str, prune: bool, digest: str) -> str:
    """Carries the previewed document to the Apply button, signed so it cannot be swapped."""
    payload = {"team": team_slug, "text": text, "prune": prune, "digest": digest}
    return signing.dumps(payload, salt=_SALT, compress=True)


class ConfigApplyForm(forms.Form):
    token = forms.CharField(widget=forms.HiddenInput, strip=False)

    def __init__(self, *args: Any, team_slug: str, **kwargs: Any) -> None:
        self.team_slug = team_slug
        super().__init__(*args, **kwargs)

    def clean_token(self) -> dict[str, Any]:
        try:
            payload = signing.loads(
                self.cleaned_data["token"], salt=_SALT, max_age=PREVIEW_MAX_AGE_SECONDS
            )
        except signing.SignatureExpired:
            raise forms.ValidationError("The preview expired; upload the file again.") from None
        except signing.BadSignature:
            raise forms.ValidationError("The preview was altered; upload the file again.") from None
        if not isinstance(payload, dict) or payload.get("team") != self.team_slug:
            raise forms.ValidationError("This preview belongs to another team.")
        return payload
