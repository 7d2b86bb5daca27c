from django.apps import AppConfig


class RollupsConfig(AppConfig):
    name = "apps.rollups"
    label = "rollups"
