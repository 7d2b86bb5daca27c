"""Who may scrape ``/metrics``: a team's metrics token, within its allowance.

Prometheus sends the token as ``Authorization: Bearer <token>`` (``authorization`` or
``bearer_token`` in a scrape config). The token names the team: nothing in the request
can reach another team's figures. Personal API tokens and ingest tokens are refused by
their prefix, without a lookup.
"""

from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest

from apps.core.counters import window_consume
from apps.teams.accounts import account_of
from apps.teams.authentication import authorization_parts
from apps.teams.models import MetricsToken
from apps.teams.services import metrics_token_authenticate
from apps.teams.tokens import API_TOKEN_PREFIX, INGEST_TOKEN_PREFIX, token_shaped

SCHEME = "Bearer"
HOW = (
    "send “Authorization: Bearer <metrics token>” (authorization or bearer_token in prometheus.yml)"
)
WINDOW_S = 60


@dataclass
class ScrapeRefused(Exception):
    status: int
    message: str
    retry_after_s: int = 0


def metrics_token_for_request(request: HttpRequest) -> MetricsToken:
    """The request's active metrics token, with its team; ScrapeRefused (401) otherwise."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header:
        raise ScrapeRefused(401, f"Missing metrics token: {HOW}.")
    parts = authorization_parts(header)
    if len(parts) != 2 or parts[0].lower() != SCHEME.lower():
        raise ScrapeRefused(401, f"Malformed Authorization header: {HOW}.")
    raw = parts[1]
    if raw.startswith(API_TOKEN_PREFIX):
        raise ScrapeRefused(
            401,
            "A personal API token cannot scrape /metrics: create a team metrics token on "
            "the team's Metrics page.",
        )
    if raw.startswith(INGEST_TOKEN_PREFIX):
        raise ScrapeRefused(
            401, "An ingest token can only send spans: use a team metrics token to scrape."
        )
    token = metrics_token_authenticate(raw=raw) if token_shaped(raw) else None
    if token is None:
        raise ScrapeRefused(401, "Unknown or revoked metrics token.")
    return token


def scrape_allowance_take(*, token: MetricsToken) -> None:
    """Count one scrape against the token's allowance and its account's (all the tokens
    of all the teams it created); ScrapeRefused (429, with the wait) past either."""
    per_token = settings.METRICS_SCRAPES_PER_MINUTE_PER_TOKEN
    per_account = settings.METRICS_SCRAPES_PER_MINUTE_PER_ACCOUNT
    # A token's digest, not its id: it is never reused, even by a new database.
    token_wait = window_consume(
        f"metrics:token:{token.digest[:24]}", limit=per_token, window_s=WINDOW_S
    )
    account = account_of(team=token.team).key
    account_wait = window_consume(
        f"metrics:account:{account}", limit=per_account, window_s=WINDOW_S
    )
    if token_wait:
        raise ScrapeRefused(
            429,
            f"This metrics token is over its {per_token} scrapes a minute "
            f"(METRICS_SCRAPES_PER_MINUTE_PER_TOKEN); retry in {token_wait} s, or scrape "
            "less often: the figures change every METRICS_CACHE_SECONDS at most.",
            token_wait,
        )
    if account_wait:
        raise ScrapeRefused(
            429,
            f"The metrics tokens of this account are over their {per_account} scrapes a "
            f"minute together (METRICS_SCRAPES_PER_MINUTE_PER_ACCOUNT); retry in "
            f"{account_wait} s.",
            account_wait,
        )
