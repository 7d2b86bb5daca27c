"""Celery application, configured from Django settings (``CELERY_`` prefix)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "budgets_site.settings")

app = Celery("budgets_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
