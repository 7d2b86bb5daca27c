"""Headless Chromium (Debian's package) driven by Playwright, for the page tests."""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

CHROMIUM = (
    os.environ.get("CHROMIUM_PATH")
    or shutil.which("chromium")
    or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
)

browser_marks = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (/usr/bin/chromium)"),
]

# Without the background-networking flags Chromium keeps dialling out from a closed network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def page(
    transactional_db: None, live_server: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; Django's ORM would refuse
    # it. Allowed for the page tests only, so no other test runs with the check off.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # The live server speaks plain HTTP.
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        page.set_default_timeout(10_000)
        yield page
        browser.close()
        # Queries made while Playwright runs use their own connection (another
        # context); close it, or the test database cannot be dropped afterwards.
        connections.close_all()
