from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "apps.ingest"
    label = "ingest"

    def ready(self) -> None:
        from apps.core.models import QuarantineKind
        from apps.core.partitions import partitioned_table_register
        from apps.core.quarantine import quarantine_releaser_register
        from apps.ingest.models import Span
        from apps.ingest.quota import daily_usage
        from apps.ingest.services.batches import raw_batches_release
        from apps.teams.ingest_usage import ingest_usage_reader_register

        quarantine_releaser_register(QuarantineKind.RAW_BATCH, raw_batches_release)
        partitioned_table_register(Span._meta.db_table, "SPAN_RETENTION_DAYS")
        ingest_usage_reader_register(lambda team: daily_usage(team=team))
