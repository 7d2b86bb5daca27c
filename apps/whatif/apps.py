from django.apps import AppConfig


class WhatIfConfig(AppConfig):
    name = "apps.whatif"
    label = "whatif"
