from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "apps.ingest"
    label = "ingest"

    def ready(self) -> None:
        from apps.core.models import QuarantineKind
        from apps.core.partitions import partitioned_table_register
        from apps.core.quarantine import quarantine_releaser_register
        from apps.ingest.services.batches import raw_batches_release

        quarantine_releaser_register(QuarantineKind.RAW_BATCH, raw_batches_release)
        partitioned_table_register("ingest_span", "SPAN_RETENTION_DAYS")
