"""Readiness checks: each returns None when healthy or a short reason when not."""

from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from kombu import Connection


def check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def check_broker() -> str | None:
    try:
        # A fresh connection from the current settings, never one from the pool.
        with Connection(
            settings.CELERY_BROKER_URL,
            transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS,
            connect_timeout=2,
        ) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=2)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def check_cache() -> str | None:
    try:
        cache.set("readyz", "1", timeout=5)
        if cache.get("readyz") != "1":
            return "cache did not return the value just written"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def readiness_checks() -> dict[str, Callable[[], str | None]]:
    checks: dict[str, Callable[[], str | None]] = {
        "database": check_database,
        "broker": check_broker,
    }
    if settings.REDIS_URL:
        checks["cache"] = check_cache
    return checks
