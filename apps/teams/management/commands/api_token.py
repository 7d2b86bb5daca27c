from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.teams.selectors import user_by_username
from apps.teams.services import api_token_create


class Command(BaseCommand):
    help = "Create personal API tokens; the token is printed once, on the last line."

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        create = actions.add_parser("create", help="Create a token for a user.")
        create.add_argument("--user", required=True, help="Username of the token's owner.")
        create.add_argument("--name", default="CLI token", help="What the token is for.")
        create.add_argument(
            "--expires-days",
            type=int,
            default=None,
            help="Days until the token stops working (default: never, until revoked).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_by_username(username=options["user"])
        if user is None:
            raise CommandError(f"No user with the username “{options['user']}”.")
        if not user.is_active:
            raise CommandError(f"User “{options['user']}” is inactive; a token would not work.")
        try:
            token, raw = api_token_create(
                user=user, name=options["name"], expires_in_days=options["expires_days"]
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        self.stdout.write(f"Created token “{token.name}” for {user}. It is not shown again:")
        # Alone on the last line so scripts can take it with `tail -n 1`.
        self.stdout.write(raw)
