"""Celery application, configured from Django settings (``CELERY_`` prefix)."""

import os
from typing import Any

from celery import Celery, Task
from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "budgets_site.settings")

app = Celery("budgets_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _database_connections_check(*, task: Task, **kwargs: Any) -> None:
    """Around each task, what Django does around each request: drop a connection that
    failed or outlived ``CONN_MAX_AGE`` and health-check the rest before their next use.

    Celery's own Django fix-up closes every connection around every task instead
    (unless ``CELERY_DB_REUSE_MAX`` is set, see settings): a new PostgreSQL backend per
    task, which forks, authenticates, fills its catalog caches and creates the drain's
    staging table again, several times a second under load. Eager tasks run inside the
    caller's connection and transaction, which are left alone.
    """
    if not getattr(task.request, "is_eager", False):
        close_old_connections()
