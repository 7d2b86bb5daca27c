from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "apps.teams"
    label = "teams"

    def ready(self) -> None:
        from apps.teams import api_schema  # noqa: F401 - registers the Bearer scheme
