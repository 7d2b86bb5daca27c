from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from apps.teams.models import Membership, Role, Team

DEMO_FILE = Path(settings.BASE_DIR) / "demo" / "budgets.yaml"
DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-budgets"  # noqa: S105 - a local demo account, printed on purpose


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
        call_command("budgets", "apply", str(DEMO_FILE), "--create-team", stdout=self.stdout)
        team = Team.objects.get(slug="demo")
        Membership.objects.get_or_create(team=team, user=user, defaults={"role": Role.OWNER})
        self.stdout.write(
            f"\n  Demo ready at {site_url}/  —  sign in as "
            f"“{DEMO_USERNAME}” with password “{DEMO_PASSWORD}”\n"
        )
