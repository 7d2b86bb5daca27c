"""A team's metrics tokens: created by its writers, revoked, authenticated at /metrics."""

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from apps.teams.accounts import account_cap_error, account_lock, account_teams
from apps.teams.models import MetricsToken, Team
from apps.teams.services.tokens import _token_mark_used, _token_revoke
from apps.teams.tokens import METRICS_TOKEN_PREFIX, token_digest, token_generate


def metrics_token_create(
    *, team: Team, name: str, created_by: User | None
) -> tuple[MetricsToken, str]:
    """Create a team's metrics token and return it with its plain value, which is not stored.

    The teams of an account hold at most ``METRICS_TOKENS_PER_ACCOUNT`` live tokens
    together, as with ingest tokens: each is a credential to watch, and the scrape
    allowance is counted per account anyway.
    """
    name = name.strip() or "Prometheus"
    with transaction.atomic():
        cap = settings.METRICS_TOKENS_PER_ACCOUNT
        if cap:
            account_lock(team=team)  # one count per account at a time
            live = MetricsToken.objects.filter(
                team__in=account_teams(team=team), revoked_at__isnull=True
            ).count()
            if live >= cap:
                raise account_cap_error(
                    what="live metrics tokens",
                    used=live,
                    cap=cap,
                    setting="METRICS_TOKENS_PER_ACCOUNT",
                    code="too_many_tokens",
                )
        raw = token_generate(METRICS_TOKEN_PREFIX)
        token = MetricsToken(
            team=team, name=name, prefix=raw[:12], digest=token_digest(raw), created_by=created_by
        )
        token.full_clean()
        token.save()
    return token, raw


def metrics_token_revoke(*, token: MetricsToken) -> MetricsToken:
    return _token_revoke(token)


def metrics_token_authenticate(*, raw: str) -> MetricsToken | None:
    """The active metrics token with this value, with its team; None for anything else."""
    if not raw.startswith(METRICS_TOKEN_PREFIX):
        return None
    token = (
        MetricsToken.objects.select_related("team")
        .filter(digest=token_digest(raw), revoked_at__isnull=True)
        .first()
    )
    if token is not None:
        _token_mark_used(token)
    return token
