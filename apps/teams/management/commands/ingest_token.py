from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.teams.selectors import team_by_slug
from apps.teams.services import ingest_token_create


class Command(BaseCommand):
    help = "Create a team's ingest tokens; the token is printed once, on the last line."

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        create = actions.add_parser("create", help="Create an ingest token for a team.")
        create.add_argument("--team", required=True, help="Slug of the team that sends spans.")
        create.add_argument("--name", default="CLI ingest token", help="What sends with it.")

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_by_slug(slug=options["team"])
        if team is None:
            raise CommandError(f"No team with the slug “{options['team']}”.")
        try:
            token, raw = ingest_token_create(team=team, name=options["name"], created_by=None)
        except ValidationError as exc:
            raise CommandError(f"Cannot create the token: {' '.join(exc.messages)}") from exc
        self.stdout.write(
            f"Created ingest token “{token.name}” for {team.slug}. It is not shown again:"
        )
        # Alone on the last line so scripts can take it with `tail -n 1`.
        self.stdout.write(raw)
