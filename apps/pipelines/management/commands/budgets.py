import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.pipelines.config_as_code import (
    ConfigApplyError,
    ConfigInvalid,
    config_apply,
    config_export,
    parse_document,
)
from apps.pipelines.environment import COMMAND_LINE
from apps.teams.models import Team


class Command(BaseCommand):
    help = (
        "Configuration as code: apply a YAML file of pipelines, stages and rules, alert "
        "channels and alert rules, or export one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        apply = actions.add_parser("apply", help="Bring a team's configuration to FILE.")
        apply.add_argument("file", metavar="FILE", help='YAML file, or "-" for standard input')
        apply.add_argument(
            "--dry-run", action="store_true", help="Print the plan and change nothing."
        )
        apply.add_argument(
            "--create-team", action="store_true", help="Create the file's team if it is missing."
        )
        apply.add_argument(
            "--prune",
            action="store_true",
            help=(
                "Delete what a section of the file manages but does not list "
                "(pipelines, channels, alerts)."
            ),
        )
        export = actions.add_parser("export", help="Print a team's configuration as YAML.")
        export.add_argument("--team", required=True, metavar="SLUG")
        export.add_argument("--output", "-o", metavar="FILE", help="Write here instead of stdout.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "apply":
            self.apply(options)
        else:
            self.export(options)

    def _read(self, name: str) -> tuple[str, str]:
        if name == "-":
            return "<stdin>", sys.stdin.read()
        try:
            return name, Path(name).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"Cannot read {name}: {exc}") from exc

    def apply(self, options: dict[str, Any]) -> None:
        source, text = self._read(options["file"])
        try:
            plan = config_apply(
                # On the server, for its operator: any variable may be read.
                document=parse_document(text, environment=COMMAND_LINE),
                prune=options["prune"],
                dry_run=options["dry_run"],
                create_team=options["create_team"],
            )
        except ConfigInvalid as exc:
            for line in exc.format(source):
                self.stderr.write(line)
            count = len(exc.errors)
            raise CommandError(
                f"{count} error{'s' if count != 1 else ''} in {source}; nothing was changed."
            ) from exc
        except ConfigApplyError as exc:
            raise CommandError(f"{exc.format(source)}\nNothing was changed.") from exc
        for line in plan.render():
            self.stdout.write(line)
        count = len(plan.changes)
        if options["dry_run"]:
            self.stdout.write(f"Dry run: {count} change{'s' if count != 1 else ''}, none applied.")
        elif count:
            self.stdout.write(f"Applied {count} change{'s' if count != 1 else ''}.")

    def export(self, options: dict[str, Any]) -> None:
        team = Team.objects.filter(slug=options["team"]).first()
        if team is None:
            raise CommandError(f"Unknown team “{options['team']}”.")
        text = config_export(team=team, masked=False)
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")
