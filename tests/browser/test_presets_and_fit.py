"""A newcomer's first pipeline in a real browser: the "RAG chat" preset shows what it
creates as the budget is typed, an ordinary app's traces sent through the official SDK
fill every stage, the rule tester keeps the rule typed, the budget bar warns in words
when the stages were given too much, and the fit check says what "Apply" would do.
Any console error (a Content-Security-Policy violation is one) fails the test."""

import os
import random
import time
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings

from apps.analysis.models import StageSample
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, Stage
from apps.teams.models import Team
from apps.teams.services import ingest_token_create
from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD, make_team, make_user
from tests.builders.spans import ask_spans
from tests.sdk_sender import replay, sdk_provider, workers_settle

pytestmark = browser_marks

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(django_settings.VAR_DIR) / "screenshots"))
TRACES = 60


def send_through_the_sdk(live_server: Any, team: Team, owner: Any) -> None:
    """The app of ``ask_spans``, with varied timings over the last 30 minutes, replayed
    through the OpenTelemetry SDK and its OTLP/HTTP exporter, then drained, analyzed and
    rolled up as the workers would."""
    _, token = ingest_token_create(team=team, name="browser test", created_by=owner)
    provider = sdk_provider(live_server.url, token)
    tracer = provider.get_tracer("ask-app")
    rng = random.Random(28)
    now = time.time_ns()
    for number in range(TRACES):
        spans = ask_spans(
            t0=now - (30 * 60 - number * 25) * 1_000_000_000,
            retrieval_ms=rng.randint(140, 320),
            rerank_ms=rng.randint(80, 190),
            answer_ms=rng.randint(800, 1700),
            first_chunk_s=rng.uniform(0.25, 0.7),
        )
        replay(tracer, spans)
    provider.shutdown()
    workers_settle()


def test_a_newcomers_preset_traces_rule_test_and_fit_check(page: Any, live_server: Any) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    owner = make_user("olivia")
    team = make_team("acme", owner=owner)

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/dashboards/")

    # The preset's stages and budgets follow the budget as it is typed.
    page.goto(f"{live_server.url}/teams/acme/pipelines/new/?preset=rag-chat")
    preview = page.locator("#preset-preview")
    expect(preview.locator("[data-role=allocated]")).to_contain_text("3400 ms of the 4000 ms")
    page.fill("input[name=name]", "Ask")
    page.fill("input[name=slug]", "ask")
    page.fill("input[name=match_root_span]", "POST /ask")
    page.fill("input[name=budget_p95_ms]", "2000")
    expect(preview.locator("[data-role=allocated]")).to_contain_text("1700 ms of the 2000 ms")
    expect(preview.locator('tr[data-stage="generation"] [data-role=budget]')).to_contain_text(
        "900 ms"
    )
    page.locator("#preset-preview").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "preset_creation_form.png"), full_page=True)
    page.get_by_role("button", name="Create pipeline").click()
    page.wait_for_url("**/teams/acme/pipelines/ask/")
    pipeline = Pipeline.objects.get(team=team, slug="ask")
    assert sum(s.budget_ms or 0 for s in pipeline.stages.all()) == 1700

    # Every stage gets samples from the app's traces, without a rule written by hand.
    send_through_the_sdk(live_server, team, owner)
    slugs = dict(Stage.objects.filter(pipeline=pipeline).values_list("pk", "slug"))
    counts = dict.fromkeys(slugs.values(), 0)
    for stage_id in StageSample.objects.filter(pipeline_id=pipeline.pk).values_list(
        "stage_id", flat=True
    ):
        counts[slugs[stage_id]] += 1
    assert counts == dict.fromkeys(slugs.values(), TRACES)
    spans = Trace.objects.filter(pipeline=pipeline).values_list(
        "untracked_critical_ns", "start_ns", "end_ns"
    )
    untracked = sum(u for u, _, _ in spans)
    assert untracked / sum((end or 0) - (start or 0) for _, start, end in spans) < 0.05

    # "Test on recent traces" leaves the rule as typed, the result beside it.
    page.goto(f"{live_server.url}/teams/acme/pipelines/ask/")
    page.evaluate("window.__marker = 1")
    page.locator('[data-stage-slug="rerank"]').get_by_role("link", name="+ Span rule").click()
    form = page.locator("form.rule-form")
    form.locator("input[name=span_name]").fill("rerank")
    form.get_by_role("button", name="Test on recent traces").click()
    expect(form.locator(".rule-test-result [data-role=matched]")).to_have_text(str(TRACES))
    expect(form.locator("input[name=span_name]")).to_have_value("rerank")
    expect(form.locator(".rule-test-result")).to_contain_text("traces match this rule")
    assert page.evaluate("window.__marker") == 1
    form.screenshot(path=str(SCREENSHOTS / "rule_tester_after_test.png"))

    # A tighter end-to-end budget: the stages were given more, and said so in words.
    Pipeline.objects.filter(pk=pipeline.pk).update(budget_p95_ms=1300)
    page.goto(f"{live_server.url}/teams/acme/dashboards/ask/?window=1h")
    warning = page.locator(".breakdown-bars [data-role=over-allocated]")
    expect(warning).to_contain_text(
        "stages allocate 1.7 s of a 1.3 s p95 budget (131 %), 400 ms more"
    )
    page.locator(".breakdown-bars").screenshot(path=str(SCREENSHOTS / "budget_bar_warning.png"))

    # The fit check says the budget cannot be met, suggests one, and says what Apply does.
    fit = page.locator("#fit")
    expect(fit.locator("[data-role=verdict]")).to_have_attribute("data-met", "false")
    expect(fit.locator('[data-plan="keep"] [data-role=turns-red]')).to_be_visible()
    expect(fit.locator('[data-plan="traces"] [data-role=none-over]')).to_be_visible()
    fit.screenshot(path=str(SCREENSHOTS / "fit_check.png"))
    suggested = int(fit.locator("[data-role=suggested-e2e]").get_attribute("data-ms") or 0)
    fit.locator('[data-plan="traces"]').get_by_role("button", name="Apply these budgets").click()
    page.wait_for_url("**/teams/acme/dashboards/ask/")
    pipeline.refresh_from_db()
    assert pipeline.budget_p95_ms == suggested
    expect(page.locator("#fit [data-role=verdict]")).to_have_attribute("data-met", "true")

    assert problems == []
