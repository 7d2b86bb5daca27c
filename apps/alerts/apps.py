from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "apps.alerts"
    label = "alerts"

    def ready(self) -> None:
        from apps.alerts.config_as_code.sections import sections_register
        from apps.alerts.tasks import alerts_evaluate_schedule
        from apps.rollups.signals import violations_changed

        # A violation that opens or closes is looked at by the alert rules at once,
        # not at the next evaluation beat.
        violations_changed.connect(alerts_evaluate_schedule, dispatch_uid="alerts-on-violations")
        # The configuration file's channels: and alerts: sections.
        sections_register()
