from django.apps import AppConfig


class RollupsConfig(AppConfig):
    name = "apps.rollups"
    label = "rollups"

    def ready(self) -> None:
        from apps.analysis.signals import samples_committed
        from apps.core.models import QuarantineKind
        from apps.core.quarantine import quarantine_releaser_register
        from apps.rollups.services.bucket_pass import rollup_buckets_release
        from apps.rollups.services.evaluation import budget_evaluations_release
        from apps.rollups.tasks import rollup_pass_schedule

        quarantine_releaser_register(QuarantineKind.ROLLUP_BUCKET, rollup_buckets_release)
        quarantine_releaser_register(QuarantineKind.EVALUATION, budget_evaluations_release)
        # Fresh samples get their rollup pass within a second instead of at the beat.
        samples_committed.connect(rollup_pass_schedule, dispatch_uid="rollups-pass-on-samples")
