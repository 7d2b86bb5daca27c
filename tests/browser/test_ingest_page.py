"""The ingest page in a real browser, after traffic sent by the official OTLP exporter.

A viewer signs in and reads today's stored bytes against the daily quota; once the
quota is used up, the page says requests are refused. Any console error fails the test.
"""

import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from apps.teams.services import ingest_token_create
from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD
from tests.conftest import TeamWorld

pytestmark = [*browser_marks, pytest.mark.usefixtures("clean_cache")]

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(django_settings.VAR_DIR) / "screenshots"))


def _send_spans(live_server: Any, world: TeamWorld, count: int) -> None:
    _, token = ingest_token_create(team=world.team, name="prod collector", created_by=world.owner)
    provider = TracerProvider(resource=Resource.create({"service.name": "chat-api"}))
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("browser-test")
    for _ in range(count):
        with (
            tracer.start_as_current_span("POST /chat"),
            tracer.start_as_current_span("llm", attributes={"llm.prompt": "q" * 2000}),
        ):
            pass
    provider.shutdown()


def test_a_viewer_reads_todays_ingestion_and_sees_when_it_is_refused(
    page: Any, live_server: Any, world: TeamWorld, settings
) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []

    def console(message: Any) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", console)
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = 60_000
    _send_spans(live_server, world, 10)

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", world.viewer.username)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/teams/{world.team.slug}/ingest-tokens/")

    usage = page.locator("#ingest-usage")
    expect(usage.locator("[data-role=stored-today]")).to_contain_text("of 58.6\xa0KB")
    expect(usage.locator("[data-role=refusing]")).to_contain_text("accepted")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "ingest_usage.png"), full_page=True)

    _send_spans(live_server, world, 30)  # past the quota: the exporter is answered 429
    page.reload()

    expect(usage.locator("[data-role=refusing] .badge.over")).to_have_text("refused")
    expect(usage.locator("meter")).to_have_attribute("max", "60000")
    page.screenshot(path=str(SCREENSHOTS / "ingest_usage_refused.png"), full_page=True)
    assert errors == []
