from django.apps import AppConfig


class RollupsConfig(AppConfig):
    name = "apps.rollups"
    label = "rollups"

    def ready(self) -> None:
        from apps.core.models import QuarantineKind
        from apps.core.quarantine import quarantine_releaser_register
        from apps.rollups.services.evaluation import budget_evaluations_release
        from apps.rollups.services.finalize import traces_release
        from apps.rollups.services.rollup import rollup_buckets_release

        quarantine_releaser_register(QuarantineKind.TRACE, traces_release)
        quarantine_releaser_register(QuarantineKind.ROLLUP_BUCKET, rollup_buckets_release)
        quarantine_releaser_register(QuarantineKind.EVALUATION, budget_evaluations_release)
