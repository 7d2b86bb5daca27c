from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.table_names import literal_table_names, project_tables


class Command(BaseCommand):
    help = (
        "Fail when application code names one of the project's tables literally instead of "
        "through its model's _meta.db_table (migrations excepted)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "roots",
            nargs="*",
            type=Path,
            help="Folders to read (default: apps, budgets_site and bench).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        base = Path(settings.BASE_DIR)
        roots = options["roots"] or [base / "apps", base / "budgets_site", base / "bench"]
        found = literal_table_names(roots, project_tables())
        if found:
            raise CommandError(
                f"{len(found)} literal table name(s):\n" + "\n".join(str(f) for f in found)
            )
        self.stdout.write("No literal table names outside migrations.")
