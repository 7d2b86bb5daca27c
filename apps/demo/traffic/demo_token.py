"""Where `make run` keeps the demo team's tokens for the traffic simulator."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from apps.teams.models import Team
from apps.teams.selectors import ingest_token_active_for_team, metrics_tokens_for_team
from apps.teams.tokens import token_digest


def demo_ingest_token_path() -> Path:
    """Written by ``demo_setup``, read by ``simulate_traffic`` when no token is given."""
    return Path(settings.VAR_DIR) / "demo-ingest-token"


def demo_metrics_token_path() -> Path:
    """The metrics token the demo's client reads its budgets with: written by
    ``demo_setup``, read by ``simulate_traffic --mode client`` when none is given."""
    return Path(settings.VAR_DIR) / "demo-metrics-token"


def metrics_token_active_for_team(*, team: Team, raw: str) -> bool:
    """Whether ``raw`` is one of the team's unrevoked metrics tokens (records no use)."""
    return (
        metrics_tokens_for_team(team=team)
        .filter(digest=token_digest(raw), revoked_at__isnull=True)
        .exists()
    )


def ingest_token_for_run(*, team: Team, given: str | None) -> str:
    """The ingest token given, else the demo team's saved one, checked."""
    if given is None:
        if team.slug != "demo":
            raise CommandError(
                f"--token is required for team {team.slug}: "
                f"create one with `manage.py ingest_token create --team {team.slug}`."
            )
        path = demo_ingest_token_path()
        if not path.exists():
            raise CommandError(
                f"No --token given and {path} does not exist: run `manage.py demo_setup`."
            )
        given = path.read_text().strip()
    token = given.strip()
    if ingest_token_active_for_team(team=team, raw=token) is None:
        raise CommandError(f"The token is not an active ingest token of team {team.slug}.")
    return token


def metrics_token_for_run(*, team: Team, given: str | None) -> str:
    """The metrics token given, else the demo team's saved one, checked."""
    if given is None:
        if team.slug != "demo":
            raise CommandError(
                f"--metrics-token is required for team {team.slug} with --mode client: "
                "create one on the team's Metrics page."
            )
        path = demo_metrics_token_path()
        if not path.exists():
            raise CommandError(
                f"No --metrics-token given and {path} does not exist: run `manage.py demo_setup`."
            )
        given = path.read_text()
    token = given.strip()
    if not metrics_token_active_for_team(team=team, raw=token):
        raise CommandError(f"The token is not an active metrics token of team {team.slug}.")
    return token
