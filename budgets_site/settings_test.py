"""Test settings: the production module with speed knobs only."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-used-anywhere-else-0123456789")
# What production must name: the tests' mail goes to Django's outbox or to a receiver a
# test starts, and their clients connect directly.
os.environ.setdefault("EMAIL_URL", "consolemail://")
os.environ.setdefault("CLIENT_IP_PROXY_COUNT", "0")

from budgets_site.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
SECURE_SSL_REDIRECT = False
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
