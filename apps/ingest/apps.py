from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "apps.ingest"
    label = "ingest"

    def ready(self) -> None:
        from apps.core.models import QuarantineKind
        from apps.core.quarantine import quarantine_releaser_register
        from apps.ingest.quota import daily_usage
        from apps.ingest.services.batches import raw_batches_release
        from apps.teams.ingest_usage import ingest_usage_reader_register

        quarantine_releaser_register(QuarantineKind.RAW_BATCH, raw_batches_release)
        # The span table's days are kept by the span store (``storage_maintain``).
        ingest_usage_reader_register(lambda team: daily_usage(team=team))
