from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    """What a running application reads of its budgets: the runtime document."""

    name = "apps.runtime"
    label = "runtime"
