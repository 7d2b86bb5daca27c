"""What a resolved alert and a channel test say, wherever they are read.

A resolved alert states the figure it resolved on, "back under" its budget, in the
webhook's summary, the e-mail's subject and body, the incident page and the API; a
channel test says in its payload (``test: true``), summary, subject and body that its
figures are examples. Deliveries go to the real HTTP and SMTP receivers.
"""

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from standardwebhooks.webhooks import Webhook

from apps.alerts.formats.text import TEST_PREFIX
from apps.alerts.formats.text import description as text_description
from apps.alerts.formats.text import observation as text_observation
from apps.alerts.models import (
    Channel,
    Incident,
    Notification,
    NotificationEvent,
    Resolution,
    WebhookFormat,
)
from apps.alerts.services.delivery import notification_deliver
from apps.alerts.services.evaluation import alerts_evaluate
from apps.alerts.services.notifications import notification_test_send
from apps.pipelines.models import Pipeline, Stage
from tests.alerts.receivers import HttpReceiver, SmtpReceiver
from tests.builders.alerts import (
    NOW,
    close,
    confirmed,
    email_channel,
    follow,
    rule,
    violation,
    webhook_channel,
)
from tests.builders.configuration import make_pipeline, make_stage, verify_email
from tests.conftest import TeamWorld, client_for

MINUTE = timedelta(minutes=1)
ONCALL = "oncall@acme.example.com"


@pytest.fixture
def rerank(world: TeamWorld) -> tuple[Pipeline, Stage]:
    pipeline = make_pipeline(world.team, "rag-chat", budget={"p95": 2500})
    return pipeline, make_stage(pipeline, "rerank", name="Rerank", budget_ms=150)


def _resolved_on(stage: Stage, channels: list[Channel], *, last_ms: float) -> Incident:
    """A stage violation at 180 ms that fires, comes back to ``last_ms`` and closes."""
    rule(stage.pipeline, channels, scope="any_stage")
    open_one = violation(stage.pipeline, stage, observed_ms=180.0)
    alerts_evaluate(now=NOW)
    # The budget evaluation's hysteresis: back under for a few ticks, then closed.
    follow(open_one, at=NOW + MINUTE, observed_ms=131.0)
    alerts_evaluate(now=NOW + MINUTE)
    follow(open_one, at=NOW + 2 * MINUTE, observed_ms=last_ms)
    close(open_one, at=NOW + 2 * MINUTE)
    alerts_evaluate(now=NOW + 2 * MINUTE)
    return Incident.objects.get()


def test_a_resolved_alert_says_back_under_with_the_figure_it_resolved_on(
    world: TeamWorld, rerank: tuple[Pipeline, Stage]
) -> None:
    _, stage = rerank
    incident = _resolved_on(stage, [webhook_channel(world.team)], last_ms=123.4)

    firing = Notification.objects.get(event=NotificationEvent.FIRING).payload
    resolved = Notification.objects.get(event=NotificationEvent.RESOLVED).payload
    assert firing["summary"] == "rag-chat · stage rerank p95 180 ms over its 150 ms budget"
    assert resolved["summary"] == (
        "rag-chat · stage rerank p95 123.4 ms, back under its 150 ms budget"
    )
    assert (resolved["observed_ms"], resolved["over_by_ms"]) == (123.4, None)
    assert resolved["test"] is False
    assert incident.facts["observed_ms"] == 123.4
    assert incident.facts["peak_ms"] == 180.0


def test_a_rule_with_a_factor_that_resolves_over_budget_does_not_claim_back_under(
    world: TeamWorld, rerank: tuple[Pipeline, Stage]
) -> None:
    pipeline, stage = rerank
    rule(pipeline, [webhook_channel(world.team)], scope="any_stage", violation_factor=Decimal("2"))
    open_one = violation(pipeline, stage, observed_ms=310.0)
    alerts_evaluate(now=NOW)
    follow(open_one, at=NOW + MINUTE, observed_ms=200.0)  # over budget, under twice it
    alerts_evaluate(now=NOW + MINUTE)

    resolved = Notification.objects.get(event=NotificationEvent.RESOLVED).payload
    assert resolved["summary"] == (
        "rag-chat · stage rerank p95 200 ms, no longer over the alert's threshold (150 ms budget)"
    )


def test_an_alert_that_fires_while_its_violation_recovers_names_the_peak_not_a_false_over(
    world: TeamWorld, rerank: tuple[Pipeline, Stage]
) -> None:
    """A violation stays open a few evaluations after its percentile is back under the
    budget; an alert whose two minutes end then must not say "123.4 ms over 150 ms"."""
    pipeline, stage = rerank
    rule(pipeline, [webhook_channel(world.team)], scope="any_stage", violation_for_minutes=2)
    open_one = violation(pipeline, stage, observed_ms=180.0)
    alerts_evaluate(now=NOW)  # pending
    follow(open_one, at=NOW + 2 * MINUTE, observed_ms=123.4)  # recovering, still open
    alerts_evaluate(now=NOW + 2 * MINUTE)

    firing = Notification.objects.get(event=NotificationEvent.FIRING).payload
    assert firing["summary"] == (
        "rag-chat · stage rerank p95 peaked at 180 ms over its 150 ms budget, 123.4 ms now"
    )
    assert (firing["observed_ms"], firing["peak_ms"], firing["over_by_ms"]) == (123.4, 180.0, None)
    assert text_observation(firing) == "p95 peaked at 180 ms > 150 ms budget, 123.4 ms now"
    assert "It peaked at 180 ms, over its 150 ms budget" in text_description(firing)


def test_an_alert_resolved_for_lack_of_data_says_so(
    world: TeamWorld, rerank: tuple[Pipeline, Stage]
) -> None:
    pipeline, stage = rerank
    rule(pipeline, [webhook_channel(world.team)], scope="any_stage")
    violation(pipeline, stage, observed_ms=180.0)
    alerts_evaluate(now=NOW)
    alerts_evaluate(now=NOW + timedelta(hours=1))  # no verdict since: no data

    incident = Incident.objects.get()
    assert incident.resolution == Resolution.NO_DATA
    resolved = Notification.objects.get(event=NotificationEvent.RESOLVED).payload
    assert resolved["summary"] == (
        "rag-chat · stage rerank p95: too few traces to judge its 150 ms budget, resolved "
        "for lack of data"
    )


@pytest.mark.parametrize("fmt", [WebhookFormat.NATIVE, WebhookFormat.ALERTMANAGER])
def test_the_resolved_webhook_reaches_the_receiver_saying_back_under(
    world: TeamWorld,
    rerank: tuple[Pipeline, Stage],
    http_receiver: HttpReceiver,
    allow_loopback: None,
    fmt: str,
) -> None:
    _, stage = rerank
    hook = webhook_channel(world.team, url=http_receiver.url(), format=fmt)
    _resolved_on(stage, [hook], last_ms=123.4)
    for notification in Notification.objects.order_by("pk"):
        notification_deliver(notification_id=notification.pk, now=NOW + 3 * MINUTE)

    firing, resolved = (json.loads(r.body) for r in http_receiver.requests)
    if fmt == WebhookFormat.NATIVE:
        last = http_receiver.requests[1]
        Webhook(hook.secret).verify(last.body, last.headers)
        assert resolved["type"] == "alert.resolved"
        assert resolved["summary"] == (
            "rag-chat · stage rerank p95 123.4 ms, back under its 150 ms budget"
        )
    else:
        annotations = resolved["alerts"][0]["annotations"]
        assert annotations["summary"] == (
            "rag-chat · stage rerank p95 123.4 ms, back under its 150 ms budget"
        )
        assert "p95 123.4 ms, back under its 150 ms budget" in annotations["description"]
        assert "over its" not in json.dumps(resolved)
        assert firing["alerts"][0]["status"] == "firing"


def test_the_resolved_e_mail_says_back_under_in_its_subject_and_body(
    world: TeamWorld, rerank: tuple[Pipeline, Stage], smtp_server: SmtpReceiver
) -> None:
    _, stage = rerank
    mail = confirmed(email_channel(world.team, email_to=[ONCALL]))
    _resolved_on(stage, [mail], last_ms=123.4)
    for notification in Notification.objects.order_by("pk"):
        notification_deliver(notification_id=notification.pk, now=NOW + 3 * MINUTE)

    fired, resolved = smtp_server.messages
    number = Incident.objects.get().pk
    assert fired.subject == f"[WARNING] Latency alert #{number} · p95 180 ms > 150 ms budget"
    assert resolved.subject.startswith(
        f"[RESOLVED] Latency alert #{number} · p95 123.4 ms, back under its "
        "150 ms budget (after 2 min)"
    )
    text, html = resolved.part("text/plain"), resolved.part("text/html")
    assert "rag-chat stage rerank p95 123.4 ms, back under its 150 ms budget." in text
    assert "Budget:    p95 150 ms; p95 123.4 ms when it resolved" in text
    assert "back under its 150 ms budget" in html
    assert "over its" not in text


def test_the_incident_page_and_the_api_say_back_under_once_resolved(
    world: TeamWorld, rerank: tuple[Pipeline, Stage]
) -> None:
    _, stage = rerank
    incident = _resolved_on(stage, [webhook_channel(world.team)], last_ms=123.4)
    page = reverse("alerts:incident", args=["acme", incident.pk])

    html = client_for(world.viewer).get(page).content.decode()
    assert (
        "<strong>Resolved:</strong> rag-chat · stage rerank p95 123.4 ms, back under its "
        "150 ms budget</p>" in html
    )
    assert "p95 when it resolved" in html
    assert "back under its budget of 150 ms" in html
    assert "over its" not in html
    assert client_for(world.outsider).get(page).status_code == 404

    client = client_for(world.viewer)
    body = client.get(f"/api/v1/incidents/{incident.pk}/", {"team": "acme"}).json()
    assert body["summary"] == "rag-chat · stage rerank p95 123.4 ms, back under its 150 ms budget"
    assert body["facts"]["observed_ms"] == 123.4


def test_a_firing_incident_page_says_what_is_over(
    world: TeamWorld, rerank: tuple[Pipeline, Stage]
) -> None:
    pipeline, stage = rerank
    rule(pipeline, [webhook_channel(world.team)], scope="any_stage")
    violation(pipeline, stage, observed_ms=180.0)
    alerts_evaluate(now=NOW)
    incident = Incident.objects.get()

    html = client_for(world.owner).get(reverse("alerts:incident", args=["acme", incident.pk]))
    assert (
        "<strong>Firing:</strong> rag-chat · stage rerank p95 180 ms over its 150 ms budget"
        in html.content.decode()
    )


# --- channel tests: example figures, said so


def test_a_webhook_test_says_it_is_a_test_with_example_figures(
    world: TeamWorld,
    rerank: tuple[Pipeline, Stage],
    http_receiver: HttpReceiver,
    allow_loopback: None,
) -> None:
    hook = webhook_channel(world.team, url=http_receiver.url())
    notification = notification_test_send(channel=hook, now=NOW)
    notification_deliver(notification_id=notification.pk, now=NOW)

    (request,) = http_receiver.requests
    payload = Webhook(hook.secret).verify(request.body, request.headers)
    assert payload["type"] == "alert.test"
    assert payload["test"] is True
    assert payload["summary"] == (
        f"{TEST_PREFIX}rag-chat · stage rerank p95 240 ms over its 150 ms budget"
    )
    assert payload["summary"].startswith("Test notification, example figures (nothing is wrong): ")
    assert payload["incident"]["id"] is None


def test_a_slack_test_says_so_in_its_text(
    world: TeamWorld,
    rerank: tuple[Pipeline, Stage],
    http_receiver: HttpReceiver,
    allow_loopback: None,
) -> None:
    hook = webhook_channel(world.team, url=http_receiver.url(), format=WebhookFormat.SLACK)
    notification_deliver(notification_id=notification_test_send(channel=hook, now=NOW).pk)

    message = json.loads(http_receiver.requests[0].body)
    assert message["text"] == (
        "Test notification: rag-chat · stage rerank p95 240 ms &gt; 150 ms budget (example figures)"
    )


def test_an_e_mail_test_says_test_and_example_in_its_subject_and_body(
    world: TeamWorld, rerank: tuple[Pipeline, Stage], smtp_server: SmtpReceiver
) -> None:
    mail = confirmed(email_channel(world.team, email_to=[ONCALL]))
    notification_deliver(notification_id=notification_test_send(channel=mail, now=NOW).pk)

    (sent,) = smtp_server.messages
    assert sent.subject == (
        "[TEST] Latency alert test · p95 240 ms > 150 ms budget (example figures)"
    )
    text, html = sent.part("text/plain"), sent.part("text/html")
    assert text.startswith(
        "This is a test of the channel “team-mail”: nothing is wrong. Its figures are "
        "examples, not measurements."
    )
    assert "Observed:  p95 240 ms (an example)" in text
    assert "Its figures are examples, not measurements." in html


def test_a_verified_accounts_test_subject_names_the_pipeline_and_says_example(
    world: TeamWorld, rerank: tuple[Pipeline, Stage], smtp_server: SmtpReceiver
) -> None:
    verify_email(world.owner)
    mail = confirmed(email_channel(world.team, email_to=[ONCALL]))
    notification_deliver(notification_id=notification_test_send(channel=mail, now=NOW).pk)

    (sent,) = smtp_server.messages
    assert sent.subject == (
        "[TEST] rag-chat · stage rerank p95 240 ms > 150 ms budget (example figures)"
    )
