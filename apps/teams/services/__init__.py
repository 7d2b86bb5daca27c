"""The teams app's services; every caller imports them from here."""

from apps.teams.services.invitations import (
    invitation_accept,
    invitation_create,
    invitation_resend,
    invitation_revoke,
)
from apps.teams.services.metrics_tokens import (
    metrics_token_authenticate,
    metrics_token_create,
    metrics_token_revoke,
)
from apps.teams.services.teams import (
    membership_add,
    membership_change_role,
    membership_default_set,
    membership_default_settle,
    membership_remove,
    team_create,
    user_create,
)
from apps.teams.services.tokens import (
    LAST_USED_RESOLUTION,
    api_token_authenticate,
    api_token_create,
    api_token_revoke,
    ingest_token_authenticate,
    ingest_token_create,
    ingest_token_revoke,
)
from apps.teams.services.verification import (
    email_verification_check,
    email_verification_confirm,
    email_verification_link,
    email_verification_record,
    email_verification_send,
)

__all__ = [
    "LAST_USED_RESOLUTION",
    "api_token_authenticate",
    "api_token_create",
    "api_token_revoke",
    "email_verification_check",
    "email_verification_confirm",
    "email_verification_link",
    "email_verification_record",
    "email_verification_send",
    "ingest_token_authenticate",
    "ingest_token_create",
    "ingest_token_revoke",
    "invitation_accept",
    "invitation_create",
    "invitation_resend",
    "invitation_revoke",
    "membership_add",
    "membership_change_role",
    "membership_default_set",
    "membership_default_settle",
    "membership_remove",
    "metrics_token_authenticate",
    "metrics_token_create",
    "metrics_token_revoke",
    "team_create",
    "user_create",
]
