"""The alert pages: history, one incident, channels and rules, for owner, editor, viewer
and outsider; forms with bad and oversized input; the send-test button and its polling."""

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.alerts.models import (
    AlertRule,
    AlertState,
    AttemptOutcome,
    Channel,
    ConditionKind,
    DeliveryAttempt,
    Incident,
    Notification,
    NotificationEvent,
    NotificationStatus,
    Resolution,
    RuleScope,
)
from apps.alerts.services.channels import channel_disable
from apps.pipelines.models import Pipeline, Stage
from tests.builders.alerts import email_channel, rule, webhook_channel
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld, client_for

MEMBERS = ["owner", "editor", "viewer"]
WRITERS = ["owner", "editor"]
TRACE = "ab" * 16
FACTS: dict[str, Any] = {
    "percentile": "p95",
    "observed_ms": 612.5,
    "peak_ms": 845.0,
    "budget_ms": 400,
    "window_s": 300,
    "sample_count": 40,
    "example_trace_ids": [TRACE],
    "top_stages": [
        {
            "slug": "retrieval",
            "name": "Retrieval",
            "share": 0.62,
            "percentile": "p95",
            "observed_ms": 612.5,
            "budget_ms": 400,
            "over_by_ms": 212.5,
        },
        {
            "slug": "generation",
            "name": "Generation",
            "share": 0.3,
            "percentile": "p95",
            "observed_ms": 900.0,
            "budget_ms": 1500,
            "over_by_ms": None,
        },
    ],
}


@dataclass
class Alerting:
    """acme with two channels, a rule firing on its retrieval stage and its history;
    globex with a pipeline, channel, rule and incident of its own."""

    world: TeamWorld
    pipeline: Pipeline
    retrieval: Stage
    mail: Channel
    hook: Channel
    rule: AlertRule
    firing: Incident
    resolved: Incident
    delivered: Notification
    failed: Notification
    other_channel: Channel
    other_rule: AlertRule
    other_incident: Incident


def make_incident(
    alert_rule: AlertRule,
    *,
    stage: Stage | None = None,
    started_at: datetime,
    resolved_at: datetime | None = None,
    facts: dict[str, Any] | None = None,
) -> Incident:
    return Incident.objects.create(
        team=alert_rule.team,
        rule=alert_rule,
        rule_slug=alert_rule.slug,
        rule_name=alert_rule.name,
        pipeline=alert_rule.pipeline,
        stage=stage,
        scope_key=f"stage:{stage.pk}" if stage else "e2e",
        severity=alert_rule.severity,
        started_at=started_at,
        resolved_at=resolved_at,
        resolution=Resolution.RECOVERED if resolved_at else "",
        facts=FACTS if facts is None else facts,
        announced=True,
    )


def make_notification(
    incident: Incident | None,
    channel: Channel,
    *,
    status: str = NotificationStatus.DELIVERED,
    event: str = NotificationEvent.FIRING,
    at: datetime | None = None,
) -> Notification:
    at = at or timezone.now()
    number = Notification.objects.count() + 1
    return Notification.objects.create(
        team=channel.team,
        channel=channel,
        incident=incident,
        event=event,
        key=f"test-key-{number}",
        message_id=f"msg_test{number}",
        payload={},
        status=status,
        next_attempt_at=at,
        created_at=at,
        finished_at=None if status == NotificationStatus.PENDING else at,
    )


def make_attempt(
    notification: Notification,
    number: int,
    *,
    outcome: str,
    http_status: int | None,
    error: str = "",
    excerpt: str = "",
) -> DeliveryAttempt:
    notification.attempts = number
    notification.save(update_fields=["attempts"])
    return DeliveryAttempt.objects.create(
        notification=notification,
        number=number,
        started_at=notification.created_at + timedelta(seconds=5 * number),
        outcome=outcome,
        http_status=http_status,
        latency_ms=42.5,
        error=error,
        response_excerpt=excerpt,
    )


def build_alerting(world: TeamWorld) -> Alerting:
    now = timezone.now()
    pipeline = make_pipeline(
        world.team,
        "rag-chat",
        name="RAG chat",
        budget={"p95": 2500},
        objective_target=99,
        objective_threshold_ms=4000,
    )
    retrieval = make_stage(pipeline, "retrieval", name="Retrieval", budget_ms=400)
    make_stage(pipeline, "generation", name="Generation", budget_ms=1500)
    mail = email_channel(world.team, "team-mail", email_to=["oncall@acme.example.com"])
    hook = webhook_channel(
        world.team, "oncall-hook", url="https://hooks.example.com/services/T00/B00/tok3n"
    )
    slow = rule(
        pipeline,
        [mail, hook],
        slug="retrieval-slow",
        name="Retrieval slow",
        scope=RuleScope.STAGE,
        stage=retrieval,
        violation_for_minutes=2,
        severity="critical",
    )
    firing = make_incident(slow, stage=retrieval, started_at=now - timedelta(minutes=12))
    resolved = make_incident(
        slow,
        stage=retrieval,
        started_at=now - timedelta(days=1, minutes=30),
        resolved_at=now - timedelta(days=1),
    )
    AlertState.objects.create(
        rule=slow,
        scope_key=f"stage:{retrieval.pk}",
        status="firing",
        condition_since=firing.started_at,
        changed_at=firing.started_at,
        incident=firing,
        evaluated_at=now,
    )
    delivered = make_notification(firing, mail, at=firing.started_at)
    make_attempt(delivered, 1, outcome=AttemptOutcome.SUCCESS, http_status=None)
    failed = make_notification(firing, hook, status=NotificationStatus.FAILED, at=firing.started_at)
    make_attempt(
        failed, 1, outcome=AttemptOutcome.RETRY, http_status=503, error="HTTP 503 from receiver"
    )
    make_attempt(
        failed,
        2,
        outcome=AttemptOutcome.PERMANENT,
        http_status=404,
        error="HTTP 404 from receiver",
        excerpt="no such hook here",
    )
    make_notification(resolved, mail, at=resolved.started_at)
    other_pipeline = make_pipeline(world.other_team, "billing", name="Globex billing")
    other_channel = webhook_channel(world.other_team, "globex-hook")
    other_rule = rule(other_pipeline, [other_channel], slug="globex-rule")
    other_incident = make_incident(other_rule, started_at=now - timedelta(hours=1))
    return Alerting(
        world,
        pipeline,
        retrieval,
        mail,
        hook,
        slow,
        firing,
        resolved,
        delivered,
        failed,
        other_channel,
        other_rule,
        other_incident,
    )


@pytest.fixture
def alerting(world: TeamWorld) -> Alerting:
    return build_alerting(world)


def url(name: str, team: str = "acme", **kwargs: Any) -> str:
    return reverse(f"alerts:{name}", kwargs={"team_slug": team, **kwargs})


def html_of(response: Any) -> str:
    return str(response.content.decode())


def read_pages(a: Alerting) -> list[str]:
    return [
        url("incidents"),
        url("incident", incident_id=a.firing.pk),
        url("incident", incident_id=a.resolved.pk),
        url("channels"),
        url("rules"),
    ]


def writer_pages(a: Alerting) -> list[str]:
    """Pages only owners and editors may open: forms and confirmations."""
    return [
        url("channel_create", kind="email"),
        url("channel_create", kind="webhook"),
        url("channel_edit", channel_slug=a.hook.slug),
        url("channel_delete", channel_slug=a.hook.slug),
        url("rule_create"),
        url("rule_edit", rule_slug=a.rule.slug),
        url("rule_delete", rule_slug=a.rule.slug),
        url("rule_silence", rule_slug=a.rule.slug),
    ]


def writes(a: Alerting) -> list[str]:
    """Every POST-only action."""
    return [
        url("channel_test", channel_slug=a.hook.slug),
        url("channel_enable", channel_slug=a.hook.slug),
        url("channel_rotate", channel_slug=a.hook.slug),
        url("channel_delete", channel_slug=a.hook.slug),
        url("rule_unsilence", rule_slug=a.rule.slug),
        url("rule_delete", rule_slug=a.rule.slug),
    ]


def htmx(client: Client, path: str, **data: Any) -> Any:
    return client.get(path, data, HTTP_HX_REQUEST="true")


# --- who sees what ------------------------------------------------------------------------


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_reads_every_alert_page(alerting: Alerting, role: str) -> None:
    client = client_for(getattr(alerting.world, role))
    for path in read_pages(alerting):
        response = client.get(path)
        assert response.status_code == 200, path


@pytest.mark.parametrize("role", WRITERS)
def test_writers_open_every_form(alerting: Alerting, role: str) -> None:
    client = client_for(getattr(alerting.world, role))
    for path in writer_pages(alerting):
        assert client.get(path).status_code == 200, path


def test_a_viewer_gets_403_on_every_form_and_write(alerting: Alerting) -> None:
    client = client_for(alerting.world.viewer)
    for path in writer_pages(alerting):
        assert client.get(path).status_code == 403, path
    for path in writes(alerting):
        assert client.post(path).status_code == 403, path
    assert Channel.objects.filter(team=alerting.world.team).count() == 2
    assert Notification.objects.filter(event=NotificationEvent.TEST).count() == 0


def test_an_outsider_gets_404_on_every_page_and_write(alerting: Alerting) -> None:
    client = client_for(alerting.world.outsider)
    for path in read_pages(alerting) + writer_pages(alerting):
        assert client.get(path).status_code == 404, path
    for path in writes(alerting):
        assert client.post(path).status_code == 404, path
    assert AlertRule.objects.filter(team=alerting.world.team).count() == 1


def test_globex_cannot_reach_acme_objects_from_its_own_team_urls(alerting: Alerting) -> None:
    client = client_for(alerting.world.outsider)
    assert client.get(url("incidents", team="globex")).status_code == 200
    acme = [
        url("incident", team="globex", incident_id=alerting.firing.pk),
        url("channel_edit", team="globex", channel_slug=alerting.mail.slug),
        url("rule_edit", team="globex", rule_slug=alerting.rule.slug),
        url("channel_result", team="globex", channel_slug=alerting.mail.slug),
    ]
    for path in acme:
        assert client.get(path).status_code == 404, path
    assert "Retrieval slow" not in html_of(client.get(url("incidents", team="globex")))
    assert "oncall-hook" not in html_of(client.get(url("channels", team="globex")))
    assert "retrieval-slow" not in html_of(client.get(url("rules", team="globex")))


def test_anonymous_visitors_are_sent_to_sign_in(alerting: Alerting) -> None:
    response = Client().get(url("incidents"))
    assert response.status_code == 302
    assert "login" in response["Location"]


def test_the_top_navigation_links_to_alerts(alerting: Alerting) -> None:
    html = html_of(client_for(alerting.world.viewer).get(reverse("pipelines:list", args=["acme"])))
    assert f'href="{url("incidents")}"' in html


# --- every page renders, empty and full, without inline script or style ---------------------


def test_the_pages_explain_themselves_to_a_team_with_nothing_yet(world: TeamWorld) -> None:
    client = client_for(world.owner)
    incidents = html_of(client.get(url("incidents")))
    assert "No channels yet: add an e-mail or webhook channel, then a rule" in incidents
    channels = html_of(client.get(url("channels")))
    assert "No channels yet: add an e-mail or webhook channel" in channels
    rules = html_of(client.get(url("rules")))
    assert "no pipeline to watch" in rules
    form = client.get(url("rule_create"))
    assert form.status_code == 200
    assert "No pipeline yet" in html_of(form)


def test_a_viewer_of_an_empty_team_is_told_whom_to_ask(world: TeamWorld) -> None:
    html = html_of(client_for(world.viewer).get(url("channels")))
    assert "Ask an editor or owner" in html
    assert "Add e-mail channel" not in html


def _assert_no_inline_script_or_style(html: str) -> None:
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag, tag
    for body in re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S):
        assert not body.strip(), "inline script"
    assert not re.search(r"\son[a-z]+\s*=", html), "inline event handler"
    assert not re.search(r"\sstyle\s*=", html), "inline style"
    assert "<style" not in html
    for element in re.findall(r"<a\b[^>]*\bhx-get=[^>]*>", html):
        href = re.search(r'\bhref="([^"]*)"', element)
        get = re.search(r'\bhx-get="([^"]*)"', element)
        assert href, element
        assert get, element
        assert href.group(1) == get.group(1), element
    for element in re.findall(r"<form\b[^>]*\bhx-(?:get|post)=[^>]*>", html):
        assert re.search(r'\baction="[^"]+"', element), element


@pytest.mark.parametrize("role", MEMBERS)
def test_no_alert_page_has_inline_script_or_style(alerting: Alerting, role: str) -> None:
    client = client_for(getattr(alerting.world, role))
    paths = read_pages(alerting) + (writer_pages(alerting) if role != "viewer" else [])
    for path in paths:
        response = client.get(path)
        assert "script-src 'self'" in response["Content-Security-Policy"]
        _assert_no_inline_script_or_style(html_of(response))


# --- the history ---------------------------------------------------------------------------


def test_the_history_lists_firing_incidents_first_with_their_deliveries(
    alerting: Alerting,
) -> None:
    later = make_incident(
        alerting.rule,
        started_at=timezone.now() - timedelta(minutes=1),
        resolved_at=timezone.now(),
    )
    html = html_of(client_for(alerting.world.viewer).get(url("incidents")))
    rows = re.findall(r'data-incident="(\d+)"', html)
    assert rows == [str(alerting.firing.pk), str(later.pk), str(alerting.resolved.pk)]
    firing_row = html.split(f'data-incident="{alerting.firing.pk}"')[1].split("</tr>")[0]
    assert "Retrieval slow" in firing_row
    assert "RAG chat" in firing_row
    assert "Retrieval" in firing_row
    assert "critical" in firing_row
    # An open incident says so in its Resolved column, and how long it has lasted beside.
    resolved_cell = re.search(r'data-role="resolved">(.*?)</td>', firing_row)
    assert resolved_cell
    assert re.sub(r"<[^>]+>", "", resolved_cell.group(1)) == "still firing"
    assert re.search(r">12 min( \d+ s)? so far<", firing_row)
    assert "2:" in firing_row
    assert "1 delivered" in firing_row
    assert "1 failed" in firing_row
    resolved_row = html.split(f'data-incident="{alerting.resolved.pk}"')[1].split("</tr>")[0]
    assert "recovered" in resolved_row
    assert ">30 min<" in resolved_row


def test_the_history_filters_by_status_and_pipeline_as_a_fragment(alerting: Alerting) -> None:
    client = client_for(alerting.world.owner)
    firing = htmx(client, url("incidents"), status="firing")
    assert firing.status_code == 200
    html = html_of(firing)
    assert "<html" not in html
    assert re.findall(r'data-incident="(\d+)"', html) == [str(alerting.firing.pk)]
    resolved = html_of(client.get(url("incidents"), {"status": "resolved"}))
    assert "<html" in resolved
    assert re.findall(r'data-incident="(\d+)"', resolved) == [str(alerting.resolved.pk)]
    other = make_pipeline(alerting.world.team, "agent", name="Agent")
    none = html_of(client.get(url("incidents"), {"pipeline": other.slug}))
    assert "No incidents match these filters" in none
    assert "data-incident=" not in none


def test_unknown_filter_values_show_everything_rather_than_fail(alerting: Alerting) -> None:
    client = client_for(alerting.world.owner)
    response = client.get(url("incidents"), {"status": "<b>", "pipeline": "x" * 5000})
    assert response.status_code == 200
    assert "<b>" not in html_of(response)


def test_the_history_pages_by_fifty_with_links_that_work_without_script(
    alerting: Alerting,
) -> None:
    start = timezone.now() - timedelta(days=30)
    for n in range(50):
        make_incident(
            alerting.rule,
            started_at=start + timedelta(minutes=n),
            resolved_at=start + timedelta(minutes=n, seconds=30),
        )
    client = client_for(alerting.world.viewer)
    first = html_of(client.get(url("incidents"), {"status": "resolved"}))
    assert len(re.findall(r'data-incident="', first)) == 50
    link = re.search(r'<a class="next" rel="next" href="([^"]+)" hx-get="([^"]+)"', first)
    assert link
    assert link.group(1) == link.group(2)
    assert "status=resolved" in link.group(1)
    second = html_of(client.get(link.group(1).replace("&amp;", "&")))
    assert len(re.findall(r'data-incident="', second)) == 1


# --- one incident --------------------------------------------------------------------------


def test_the_incident_page_shows_its_facts_and_links(alerting: Alerting) -> None:
    html = html_of(
        client_for(alerting.world.viewer).get(url("incident", incident_id=alerting.firing.pk))
    )
    assert "Observed p95" in html
    assert "612.5 ms" in html
    assert "845 ms" in html
    assert "5 min" in html
    assert "62.0 %" in html
    assert 'data-stage="generation"' in html
    assert reverse("traces:detail", args=["acme", TRACE]) in html
    stage_dashboard = reverse("dashboards:stage", args=["acme", "rag-chat", "retrieval"])
    assert f'href="{stage_dashboard}"' in html
    assert reverse("dashboards:pipeline", args=["acme", "rag-chat"]) in html


def test_the_incident_page_lists_every_notification_with_each_attempt(
    alerting: Alerting,
) -> None:
    html = html_of(
        client_for(alerting.world.viewer).get(url("incident", incident_id=alerting.firing.pk))
    )
    assert f'data-notification="{alerting.delivered.pk}"' in html
    failed = html.split(f'data-notification="{alerting.failed.pk}"')[1]
    assert "oncall-hook" in failed
    assert "failed" in failed
    assert 'data-attempt="1"' in failed
    assert 'data-attempt="2"' in failed
    assert "503" in failed
    assert "404" in failed
    assert "HTTP 503 from receiver" in failed
    assert "failed, will retry" in failed
    assert "failed permanently" in failed
    assert "no such hook here" in failed
    assert "42.5 ms" in failed


def test_an_incident_with_little_in_its_facts_still_renders(alerting: Alerting) -> None:
    bare = make_incident(
        alerting.rule, started_at=timezone.now(), resolved_at=timezone.now(), facts={}
    )
    response = client_for(alerting.world.owner).get(url("incident", incident_id=bare.pk))
    assert response.status_code == 200
    assert "No example was kept" in html_of(response)


def test_a_burn_rate_incident_shows_its_windows(alerting: Alerting) -> None:
    burn = rule(
        alerting.pipeline, [alerting.mail], slug="burning", condition=ConditionKind.BURN_RATE
    )
    incident = make_incident(
        burn,
        started_at=timezone.now(),
        facts={
            "objective_target": 99.0,
            "objective_threshold_ms": 4000,
            "percentile": None,
            "observed_ms": None,
            "budget_ms": 4000,
            "window_s": 3600,
            "example_trace_ids": [],
            "burn_rates": [
                {
                    "long_window_s": 3600,
                    "short_window_s": 300,
                    "factor": 14.4,
                    "long_burn_rate": 20.1,
                    "short_burn_rate": 31.0,
                    "severity": "critical",
                }
            ],
        },
    )
    html = html_of(client_for(alerting.world.owner).get(url("incident", incident_id=incident.pk)))
    assert "Burn rates" in html
    assert "20.1" in html
    assert "14.4" in html


def test_a_deleted_rule_leaves_its_incidents_readable(alerting: Alerting) -> None:
    alerting.rule.delete()
    client = client_for(alerting.world.owner)
    assert "rule deleted" in html_of(client.get(url("incidents")))
    assert client.get(url("incident", incident_id=alerting.firing.pk)).status_code == 200


# --- channels ------------------------------------------------------------------------------


def test_channels_show_kind_target_format_state_and_last_delivery(alerting: Alerting) -> None:
    html = html_of(client_for(alerting.world.owner).get(url("channels")))
    mail = html.split('data-channel="team-mail"')[1].split("</tr>")[0]
    assert "oncall@acme.example.com" in mail
    assert "delivered" in mail
    hook = html.split('data-channel="oncall-hook"')[1].split("</tr>")[0]
    assert "https://hooks.example.com/services/T00/B00/tok3n" in hook
    assert "native" in hook
    assert "failed" in hook
    assert "HTTP 404" in hook
    assert "HTTP 404 from receiver" in hook
    assert "Send test" in hook


def test_viewers_never_see_a_signing_secret_nor_a_webhook_path(alerting: Alerting) -> None:
    client = client_for(alerting.world.viewer)
    for path in read_pages(alerting):
        html = html_of(client.get(path))
        assert alerting.hook.secret not in html, path
        assert "tok3n" not in html, path
    html = html_of(client.get(url("channels")))
    assert "https://hooks.example.com/…" in html
    for control in ("Send test", "Enable again", "Edit", "Delete", "Add e-mail channel"):
        assert control not in html, control


def test_writers_see_the_secret_on_the_webhook_form_with_a_rotate_button(
    alerting: Alerting,
) -> None:
    client = client_for(alerting.world.editor)
    html = html_of(client.get(url("channel_edit", channel_slug=alerting.hook.slug)))
    assert alerting.hook.secret in html
    assert url("channel_rotate", channel_slug=alerting.hook.slug) in html
    assert alerting.hook.secret not in html_of(client.get(url("channels")))


def test_rotate_makes_a_new_secret(alerting: Alerting) -> None:
    old = alerting.hook.secret
    response = client_for(alerting.world.owner).post(
        url("channel_rotate", channel_slug=alerting.hook.slug)
    )
    assert response.status_code == 302
    alerting.hook.refresh_from_db()
    assert alerting.hook.secret != old
    assert alerting.hook.secret.startswith("whsec_")


def test_an_email_channel_has_no_secret_to_rotate(alerting: Alerting) -> None:
    response = client_for(alerting.world.owner).post(
        url("channel_rotate", channel_slug=alerting.mail.slug)
    )
    assert response.status_code == 400


@pytest.mark.parametrize("role", WRITERS)
def test_writers_add_an_email_channel_with_addresses_on_lines_or_commas(
    alerting: Alerting, role: str
) -> None:
    response = client_for(getattr(alerting.world, role)).post(
        url("channel_create", kind="email"),
        {"slug": "sre", "name": "SRE", "addresses": "a@acme.example.com,\nb@acme.example.com"},
    )
    assert response.status_code == 302
    channel = Channel.objects.get(team=alerting.world.team, slug="sre")
    assert channel.email_to == ["a@acme.example.com", "b@acme.example.com"]


def test_a_new_webhook_lands_on_its_form_with_the_secret_to_copy(alerting: Alerting) -> None:
    client = client_for(alerting.world.owner)
    response = client.post(
        url("channel_create", kind="webhook"),
        {"slug": "pager", "url": "https://pager.example.com/in", "format": "alertmanager"},
    )
    assert response["Location"] == url("channel_edit", channel_slug="pager")
    channel = Channel.objects.get(team=alerting.world.team, slug="pager")
    assert channel.format == "alertmanager"
    assert channel.secret in html_of(client.get(response["Location"]))


@pytest.mark.parametrize(
    ("kind", "data", "field_error"),
    [
        ("email", {"slug": "x", "addresses": "not-an-address"}, "is not an e-mail address"),
        ("email", {"slug": "x", "addresses": " \n , "}, "Give at least one address"),
        ("webhook", {"slug": "x", "url": "ftp://files.example.com/", "format": "native"}, "http"),
        ("webhook", {"slug": "x", "url": "not a url", "format": "native"}, "http"),
        ("webhook", {"slug": "x", "url": "https://ok.example.com/", "format": "xml"}, "valid"),
        (
            "webhook",
            {"slug": "x", "url": "https://ok.example.com/", "format": "native", "secret": "abc"},
            "whsec_",
        ),
        ("email", {"slug": "Bad Slug!", "addresses": "a@example.com"}, "slug"),
        ("email", {"slug": "team-mail", "addresses": "a@example.com"}, "already exists"),
    ],
)
def test_bad_channel_input_is_shown_on_the_form_and_saves_nothing(
    alerting: Alerting, kind: str, data: dict[str, str], field_error: str
) -> None:
    before = Channel.objects.count()
    response = client_for(alerting.world.owner).post(url("channel_create", kind=kind), data)
    assert response.status_code == 422
    assert field_error.lower() in html_of(response).lower()
    assert Channel.objects.count() == before


def test_a_ten_thousand_line_address_list_is_refused_at_once(alerting: Alerting) -> None:
    addresses = "\n".join(f"user{n}@acme.example.com" for n in range(10_000))
    response = client_for(alerting.world.owner).post(
        url("channel_create", kind="email"), {"slug": "everyone", "addresses": addresses}
    )
    assert response.status_code == 422
    assert "at most" in html_of(response)
    assert not Channel.objects.filter(slug="everyone").exists()


def test_twenty_one_addresses_are_one_too_many(alerting: Alerting) -> None:
    addresses = ", ".join(f"u{n}@acme.example.com" for n in range(21))
    response = client_for(alerting.world.owner).post(
        url("channel_create", kind="email"), {"slug": "many", "addresses": addresses}
    )
    assert response.status_code == 422
    assert "21 addresses" in html_of(response)


def test_a_five_thousand_character_url_is_refused(alerting: Alerting) -> None:
    response = client_for(alerting.world.owner).post(
        url("channel_create", kind="webhook"),
        {"slug": "long", "url": "https://x.example.com/" + "a" * 5000, "format": "native"},
    )
    assert response.status_code == 422
    assert "at most 2000 characters" in html_of(response)
    assert not Channel.objects.filter(slug="long").exists()


def test_an_unknown_kind_of_channel_is_404(alerting: Alerting) -> None:
    client = client_for(alerting.world.owner)
    assert client.get(url("channel_create", kind="carrier-pigeon")).status_code == 404


def test_editing_a_channel_keeps_its_slug_and_secret(alerting: Alerting) -> None:
    secret = alerting.hook.secret
    response = client_for(alerting.world.editor).post(
        url("channel_edit", channel_slug=alerting.hook.slug),
        {
            "slug": "renamed",
            "name": "On-call",
            "url": "https://new.example.com/",
            "format": "slack",
        },
    )
    assert response.status_code == 302
    alerting.hook.refresh_from_db()
    assert (alerting.hook.slug, alerting.hook.name) == ("oncall-hook", "On-call")
    assert (alerting.hook.url, alerting.hook.format) == ("https://new.example.com/", "slack")
    assert alerting.hook.secret == secret


def test_deleting_a_channel_names_the_rules_that_use_it(alerting: Alerting) -> None:
    client = client_for(alerting.world.owner)
    confirm = html_of(client.get(url("channel_delete", channel_slug=alerting.mail.slug)))
    assert "retrieval-slow" in confirm
    assert client.post(url("channel_delete", channel_slug=alerting.mail.slug)).status_code == 302
    assert not Channel.objects.filter(pk=alerting.mail.pk).exists()


def test_a_disabled_channel_shows_why_and_can_be_enabled_again(alerting: Alerting) -> None:
    channel_disable(channel=alerting.hook, reason="The receiver answered 410: gone")
    client = client_for(alerting.world.owner)
    html = html_of(client.get(url("channels")))
    row = html.split('data-channel="oncall-hook"')[1].split("</tr>")[0]
    assert "disabled" in row
    assert "The receiver answered 410: gone" in row
    assert "Enable again" in row
    assert "Send test" not in row
    viewer = html_of(client_for(alerting.world.viewer).get(url("channels")))
    assert "The receiver answered 410: gone" in viewer
    assert "Enable again" not in viewer
    assert client.post(url("channel_enable", channel_slug="oncall-hook")).status_code == 302
    alerting.hook.refresh_from_db()
    assert alerting.hook.is_enabled


# --- the send-test button ------------------------------------------------------------------


def test_send_test_writes_one_notification_and_the_fragment_shows_it_pending(
    alerting: Alerting,
) -> None:
    client = client_for(alerting.world.editor)
    response = client.post(
        url("channel_test", channel_slug=alerting.hook.slug), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    (test,) = Notification.objects.filter(event=NotificationEvent.TEST)
    assert test.channel == alerting.hook
    assert test.status == NotificationStatus.PENDING
    html = html_of(response)
    assert "<html" not in html
    assert 'id="channel-result-oncall-hook"' in html
    assert "pending" in html
    assert 'hx-trigger="every 2s"' in html
    poll = url("channel_result", channel_slug=alerting.hook.slug)
    assert f'hx-get="{poll}"' in html


def test_the_fragment_stops_asking_once_the_test_is_delivered(alerting: Alerting) -> None:
    client = client_for(alerting.world.owner)
    client.post(url("channel_test", channel_slug=alerting.mail.slug), HTTP_HX_REQUEST="true")
    test = Notification.objects.get(event=NotificationEvent.TEST)
    poll = url("channel_result", channel_slug=alerting.mail.slug)
    assert 'hx-trigger="every 2s"' in html_of(htmx(client, poll))
    test.status = NotificationStatus.DELIVERED
    test.finished_at = timezone.now()
    test.save()
    make_attempt(test, 1, outcome=AttemptOutcome.SUCCESS, http_status=None)
    html = html_of(htmx(client, poll))
    assert "delivered" in html
    assert "every 2s" not in html
    assert "hx-get" not in html


def test_send_test_without_script_redirects_back_to_the_channels(alerting: Alerting) -> None:
    response = client_for(alerting.world.owner).post(
        url("channel_test", channel_slug=alerting.mail.slug)
    )
    assert response.status_code == 302
    assert response["Location"] == url("channels")
    assert Notification.objects.filter(event=NotificationEvent.TEST).count() == 1


def test_a_disabled_channel_takes_no_test(alerting: Alerting) -> None:
    channel_disable(channel=alerting.hook, reason="gone")
    response = client_for(alerting.world.owner).post(
        url("channel_test", channel_slug=alerting.hook.slug), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 400
    assert not Notification.objects.filter(event=NotificationEvent.TEST).exists()


def test_the_result_fragment_is_only_a_fragment_for_htmx(alerting: Alerting) -> None:
    client = client_for(alerting.world.viewer)
    poll = url("channel_result", channel_slug=alerting.hook.slug)
    assert client.get(poll)["Location"] == url("channels")
    html = html_of(htmx(client, poll))
    assert "failed" in html
    assert "tok3n" not in html


# --- rules ---------------------------------------------------------------------------------


def test_rules_read_in_words_with_their_state_and_silence(alerting: Alerting) -> None:
    e2e = rule(
        alerting.pipeline,
        [alerting.hook],
        slug="e2e-double",
        violation_factor=Decimal("1.5"),
    )
    rule(alerting.pipeline, [], slug="burning", condition=ConditionKind.BURN_RATE)
    e2e.silenced_until = timezone.now() + timedelta(hours=2)
    e2e.silence_reason = "Reindexing the vector store"
    e2e.save()
    html = html_of(client_for(alerting.world.viewer).get(url("rules")))
    slow = html.split('data-rule="retrieval-slow"')[1].split("</tr>")[0]
    assert "stage Retrieval" in slow
    assert "p95 over budget for 2 min" in slow
    assert "critical" in slow
    assert "Team Mail" in slow or "team-mail" in slow
    assert "Retrieval: <span" in slow
    assert "firing" in slow
    double = html.split('data-rule="e2e-double"')[1].split("</tr>")[0]
    assert "end to end" in double
    assert "p95 at 1.5\u00d7 budget, at once" in double
    assert "Reindexing the vector store" in double
    burning = html.split('data-rule="burning"')[1].split("</tr>")[0]
    assert "burn rate, SRE defaults" in burning
    assert "it tells nobody" in burning
    for control in ("New rule", ">Silence</a>", ">Unsilence</button>", ">Edit</a>"):
        assert control not in html, control


def rule_data(a: Alerting, **overrides: Any) -> dict[str, Any]:
    data = {
        "slug": "gen-slow",
        "name": "",
        "pipeline": a.pipeline.slug,
        "scope": "stage",
        "stage": str(a.retrieval.pk),
        "condition": "violation",
        "violation_for_minutes": "5",
        "violation_factor": "",
        "severity": "warning",
        "channels": [a.mail.slug],
        "renotify_minutes": "60",
        "notify_on_resolve": "on",
        "no_data": "keep",
        "no_data_after_s": "",
        "enabled": "on",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.parametrize("role", WRITERS)
def test_writers_create_a_rule_for_one_stage(alerting: Alerting, role: str) -> None:
    response = client_for(getattr(alerting.world, role)).post(
        url("rule_create"), rule_data(alerting)
    )
    assert response.status_code == 302
    created = AlertRule.objects.get(team=alerting.world.team, slug="gen-slow")
    assert created.stage == alerting.retrieval
    assert created.violation_for_minutes == 5
    assert list(created.channels.all()) == [alerting.mail]
    assert (created.renotify_minutes, created.no_data) == (60, "keep")


def test_the_rule_form_offers_stages_grouped_by_pipeline(alerting: Alerting) -> None:
    html = html_of(client_for(alerting.world.owner).get(url("rule_create")))
    assert '<optgroup label="RAG chat">' in html
    assert "Globex" not in html
    assert "globex-hook" not in html


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"pipeline": "billing"}, "Select a valid choice"),
        ({"channels": ["globex-hook"]}, "Select a valid choice"),
        ({"channels": ["no-such-channel"]}, "Select a valid choice"),
        ({"stage": "999999"}, "Select a valid choice"),
        ({"stage": ""}, "Choose the stage"),
        ({"violation_for_minutes": "1441"}, "Must be a whole number of minutes between 0 and 1440"),
        ({"violation_factor": "0.5"}, "Must be between 1 and 100 times the budget, not 0.5."),
        ({"violation_factor": "1.234"}, "Has at most 2 decimals."),
        ({"renotify_minutes": "10081"}, "between 0 (never remind) and 10080"),
        ({"no_data_after_s": "29"}, "between 30 and 86400"),
        ({"scope": "any_stage", "condition": "burn_rate"}, "use scope e2e"),
        ({"slug": "retrieval-slow"}, "already exists"),
    ],
)
def test_bad_rule_input_is_shown_on_the_form_and_saves_nothing(
    alerting: Alerting, overrides: dict[str, Any], message: str
) -> None:
    response = client_for(alerting.world.owner).post(
        url("rule_create"), rule_data(alerting, **overrides)
    )
    assert response.status_code == 422
    assert message in html_of(response)
    assert AlertRule.objects.filter(team=alerting.world.team).count() == 1


def test_a_stage_of_another_pipeline_is_refused(alerting: Alerting) -> None:
    agent = make_pipeline(alerting.world.team, "agent", name="Agent")
    tool = make_stage(agent, "tool", name="Tool")
    response = client_for(alerting.world.owner).post(
        url("rule_create"), rule_data(alerting, stage=str(tool.pk))
    )
    assert response.status_code == 422
    assert "Name a stage of this pipeline" in html_of(response)


def test_editing_a_rule_changes_it_and_keeps_its_slug(alerting: Alerting) -> None:
    client = client_for(alerting.world.owner)
    form = html_of(client.get(url("rule_edit", rule_slug=alerting.rule.slug)))
    assert 'value="2"' in form
    response = client.post(
        url("rule_edit", rule_slug=alerting.rule.slug),
        rule_data(alerting, slug="ignored", scope="e2e", stage="", violation_factor="1.25"),
    )
    assert response.status_code == 302
    alerting.rule.refresh_from_db()
    assert alerting.rule.slug == "retrieval-slow"
    assert (alerting.rule.scope, alerting.rule.stage) == ("e2e", None)
    assert alerting.rule.violation_factor == Decimal("1.25")
    alerting.firing.refresh_from_db()
    assert alerting.firing.resolution == Resolution.RULE_CHANGED


def test_a_burn_rate_rule_of_its_own_windows_keeps_them_when_edited(alerting: Alerting) -> None:
    windows = [{"long_s": 7200, "short_s": 600, "factor": 10.0, "severity": "critical"}]
    burn = rule(
        alerting.pipeline, [], slug="burn", condition=ConditionKind.BURN_RATE, burn_windows=windows
    )
    client = client_for(alerting.world.owner)
    assert "window pair of its own" in html_of(client.get(url("rule_edit", rule_slug="burn")))
    response = client.post(
        url("rule_edit", rule_slug="burn"),
        rule_data(alerting, scope="e2e", stage="", condition="burn_rate", severity="critical"),
    )
    assert response.status_code == 302
    burn.refresh_from_db()
    assert burn.burn_windows == windows


def test_deleting_a_rule_keeps_its_history(alerting: Alerting) -> None:
    client = client_for(alerting.world.editor)
    assert client.post(url("rule_delete", rule_slug=alerting.rule.slug)).status_code == 302
    assert not AlertRule.objects.filter(pk=alerting.rule.pk).exists()
    assert Incident.objects.filter(pk=alerting.firing.pk).exists()


@pytest.mark.parametrize(("duration", "hours"), [("1h", 1), ("4h", 4), ("1d", 24)])
def test_silencing_for_a_while_with_a_reason(alerting: Alerting, duration: str, hours: int) -> None:
    response = client_for(alerting.world.owner).post(
        url("rule_silence", rule_slug=alerting.rule.slug),
        {"duration": duration, "reason": "Planned reindex"},
    )
    assert response.status_code == 302
    alerting.rule.refresh_from_db()
    assert alerting.rule.silence_reason == "Planned reindex"
    assert alerting.rule.silenced_until is not None
    left = alerting.rule.silenced_until - timezone.now()
    assert timedelta(hours=hours) - timedelta(minutes=1) < left <= timedelta(hours=hours)


def test_silencing_until_a_custom_time(alerting: Alerting) -> None:
    until = (timezone.now() + timedelta(days=3)).replace(second=0, microsecond=0)
    response = client_for(alerting.world.owner).post(
        url("rule_silence", rule_slug=alerting.rule.slug),
        {"duration": "custom", "until": until.strftime("%Y-%m-%dT%H:%M"), "reason": "Migration"},
    )
    assert response.status_code == 302
    alerting.rule.refresh_from_db()
    assert alerting.rule.silenced_until == until


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"duration": "1h", "reason": " "}, "This field is required"),
        ({"duration": "custom", "reason": "x"}, "Give the time the silence ends"),
        ({"duration": "custom", "until": "2001-01-01T00:00", "reason": "x"}, "in the future"),
        ({"duration": "custom", "until": "2999-01-01T00:00", "reason": "x"}, "less than 90 days"),
        ({"duration": "forever", "reason": "x"}, "Select a valid choice"),
    ],
)
def test_a_bad_silence_is_refused(alerting: Alerting, data: dict[str, str], message: str) -> None:
    response = client_for(alerting.world.owner).post(
        url("rule_silence", rule_slug=alerting.rule.slug), data
    )
    assert response.status_code == 422
    assert message in html_of(response)
    alerting.rule.refresh_from_db()
    assert alerting.rule.silenced_until is None


def test_unsilencing_lets_the_rule_notify_again(alerting: Alerting) -> None:
    alerting.rule.silenced_until = timezone.now() + timedelta(hours=1)
    alerting.rule.silence_reason = "x"
    alerting.rule.save()
    client = client_for(alerting.world.owner)
    assert "Unsilence" in html_of(client.get(url("rules")))
    assert client.post(url("rule_unsilence", rule_slug=alerting.rule.slug)).status_code == 302
    alerting.rule.refresh_from_db()
    assert alerting.rule.silenced_until is None


def test_writes_refuse_get(alerting: Alerting) -> None:
    client = client_for(alerting.world.owner)
    assert client.get(url("channel_test", channel_slug=alerting.mail.slug)).status_code == 405
    assert client.get(url("rule_unsilence", rule_slug=alerting.rule.slug)).status_code == 405
