import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from apps.demo.traffic.demo_token import (
    demo_ingest_token_path,
    demo_metrics_token_path,
    metrics_token_active_for_team,
)
from apps.teams.models import EmailProof, Membership, Role, Team
from apps.teams.selectors import ingest_token_active_for_team
from apps.teams.services import (
    email_verification_record,
    ingest_token_create,
    metrics_token_create,
)

DEMO_FILE = Path(settings.BASE_DIR) / "demo" / "budgets.yaml"
DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-budgets"  # noqa: S105 - a local demo account, printed on purpose
DEMO_TOKEN_NAME = "Demo traffic"  # noqa: S105 - a label, not a secret
DEMO_TEAM = "demo"  # the team of DEMO_FILE


class Command(BaseCommand):
    help = "Create the demo user and team and apply the demo pipeline (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--site-url", default=settings.SITE_URL)

    def handle(self, *args: Any, site_url: str, **options: Any) -> None:
        user_model = get_user_model()
        user = user_model.objects.filter(username=DEMO_USERNAME).first()
        if user is None:
            user = user_model.objects.create_user(
                username=DEMO_USERNAME, email="demo@example.com", password=DEMO_PASSWORD
            )
        # Verified, so that the demo channel's address is a verified member's and the demo's
        # alerts show as delivered in the log rather than waiting for a confirmation.
        email_verification_record(user=user, proof=EmailProof.DEMO)
        call_command("budgets", "apply", str(DEMO_FILE), "--create-team", stdout=self.stdout)
        team = Team.objects.get(slug=DEMO_TEAM)
        Membership.objects.get_or_create(team=team, user=user, defaults={"role": Role.OWNER})
        path = _save_demo_ingest_token(team=team, user=user)
        self.stdout.write(f"  ingest token saved to {path}")
        path = _save_demo_metrics_token(team=team, user=user)
        self.stdout.write(f"  metrics token (the demo client's budgets) saved to {path}")
        self.stdout.write(
            f"\n  Demo set up for {site_url}/: user “{DEMO_USERNAME}”, password “{DEMO_PASSWORD}”\n"
        )


def _save_demo_ingest_token(*, team: Team, user: User) -> Path:
    """Keep the saved token while it still works; otherwise create one and save it."""
    path = demo_ingest_token_path()
    raw = _saved(path)
    if not raw or ingest_token_active_for_team(team=team, raw=raw) is None:
        _token, raw = ingest_token_create(team=team, name=DEMO_TOKEN_NAME, created_by=user)
    _save_private(path, raw)
    return path


def _save_demo_metrics_token(*, team: Team, user: User) -> Path:
    """As the ingest token: the demo traffic's client reads its budgets with this one."""
    path = demo_metrics_token_path()
    raw = _saved(path)
    if not raw or not metrics_token_active_for_team(team=team, raw=raw):
        _token, raw = metrics_token_create(team=team, name=DEMO_TOKEN_NAME, created_by=user)
    _save_private(path, raw)
    return path


def _saved(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


def _save_private(path: Path, raw: str) -> None:
    # Private before anything is written, also when an older file had a wider mode.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(raw + "\n")
