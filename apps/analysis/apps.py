from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "apps.analysis"
    label = "analysis"

    def ready(self) -> None:
        from apps.analysis.models import Degradation, StageSample
        from apps.analysis.services.trace_analysis import traces_release
        from apps.core.models import QuarantineKind
        from apps.core.partitions import partitioned_table_register
        from apps.core.quarantine import quarantine_releaser_register

        quarantine_releaser_register(QuarantineKind.TRACE, traces_release)
        partitioned_table_register(StageSample._meta.db_table, "SAMPLE_RETENTION_DAYS")
        partitioned_table_register(Degradation._meta.db_table, "SAMPLE_RETENTION_DAYS")
