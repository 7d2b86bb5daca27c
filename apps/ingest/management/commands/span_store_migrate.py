"""``manage.py span_store_migrate``: bring the span store's own schema up to date.

PostgreSQL's span table comes with ``migrate``; a ClickHouse store's tables come from
here (``apps.ingest.span_store.clickhouse_schema``). Every statement is idempotent, so
running it again, or on every deployment, changes nothing that is there.

It also sets the trace rows' search index to suit the store
(``apps.ingest.services.search_index``): kept with spans in PostgreSQL, dropped where
the store keeps the search sets; ``--copy-search-sets`` copies the sets of traces
analyzed before into such a store.
"""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.ingest.services.search_index import search_index_sync, search_sets_copy
from apps.ingest.span_store import SpanStoreUnavailable, span_store
from apps.ingest.span_store.clickhouse_client import clickhouse, clickhouse_config
from apps.ingest.span_store.clickhouse_schema import schema_statements


class Command(BaseCommand):
    help = (
        "Create or update the span store's tables (ClickHouse; PostgreSQL's come with "
        "migrate) and set the trace search index to suit the store."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--print", action="store_true", help="Print the statements instead of running them."
        )
        parser.add_argument(
            "--copy-search-sets",
            action="store_true",
            help="Copy the search sets of traces analyzed so far into a store that keeps them.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.SPAN_STORE_URL:
            if options["print"]:
                return
            self.stdout.write("Spans are kept in PostgreSQL: `manage.py migrate` makes its tables.")
            self.stdout.write(search_index_sync(span_store()).capitalize() + ".")
            return
        config = clickhouse_config(settings.SPAN_STORE_URL)
        statements = list(schema_statements(config))
        if options["print"]:
            for statement in statements:
                self.stdout.write(statement + ";")
            return
        store = span_store()
        try:
            with clickhouse(config) as client:
                for statement in statements:
                    client.execute(statement)
            if options["copy_search_sets"]:
                copied = search_sets_copy(store)
                self.stdout.write(f"Copied the search sets of {copied} traces.")
        except SpanStoreUnavailable as exc:
            raise CommandError(str(exc)) from exc
        where = f"cluster {config.cluster}" if config.cluster else "one server"
        self.stdout.write(
            f"Span store schema up to date: database {config.database} on {where} "
            f"({len(statements)} statements)."
        )
        # Only once the store holds the sets: until then the index still answers.
        self.stdout.write(search_index_sync(store).capitalize() + ".")
