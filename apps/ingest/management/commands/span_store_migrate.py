"""``manage.py span_store_migrate``: bring the span store's own schema up to date.

PostgreSQL's span table comes with ``migrate``; a ClickHouse store's tables come from
here (``apps.ingest.span_store.clickhouse_schema``). Every statement is idempotent, so
running it again, or on every deployment, changes nothing that is there.
"""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.ingest.span_store import SpanStoreUnavailable
from apps.ingest.span_store.clickhouse_client import clickhouse, clickhouse_config
from apps.ingest.span_store.clickhouse_schema import schema_statements


class Command(BaseCommand):
    help = "Create or update the span store's tables (ClickHouse; PostgreSQL's come with migrate)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--print", action="store_true", help="Print the statements instead of running them."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.SPAN_STORE_URL:
            self.stdout.write("Spans are kept in PostgreSQL: `manage.py migrate` makes its tables.")
            return
        config = clickhouse_config(settings.SPAN_STORE_URL)
        statements = list(schema_statements(config))
        if options["print"]:
            for statement in statements:
                self.stdout.write(statement + ";")
            return
        try:
            with clickhouse(config) as client:
                for statement in statements:
                    client.execute(statement)
        except SpanStoreUnavailable as exc:
            raise CommandError(str(exc)) from exc
        where = f"cluster {config.cluster}" if config.cluster else "one server"
        self.stdout.write(
            f"Span store schema up to date: database {config.database} on {where} "
            f"({len(statements)} statements)."
        )
