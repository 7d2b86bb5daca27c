"""The ``channels:`` and ``alerts:`` sections of the configuration file.

Parsing needs no database; what a rule names is checked against the database and
the rest of the file when the file is planned, and the plan runs through the
alert services.
"""

import io
import re
import textwrap
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from pytest_django import Settings

from apps.alerts.config_as_code import alerts_plan, channels_plan
from apps.alerts.models import AlertRule, Channel, ChannelKind, RuleScope, Severity
from apps.alerts.transports.signing import secret_generate
from apps.pipelines.config_as_code import (
    ConfigInvalid,
    config_apply,
    config_export,
    config_preview,
    parse_document,
)
from apps.pipelines.config_as_code.sections import (
    Section,
    section_register,
    section_unregister,
    sections,
)
from apps.pipelines.config_as_code.steps import Plan
from apps.pipelines.environment import COMMAND_LINE
from apps.pipelines.models import Pipeline, SpanRule, Stage
from tests.builders.alerts import email_channel, rule, webhook_channel
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld, client_for

ISSUE = """\
team: acme
channels:
  - slug: oncall-hook
    kind: webhook
    url: https://hooks.example.com/latency
    secret_env: ONCALL_HOOK_SECRET   # read from the environment when applied
    format: native                    # native | alertmanager | slack
  - slug: team-mail
    kind: email
    to: [oncall@example.com]
alerts:
  - slug: stage-over-budget
    pipeline: rag-chat
    scope: any_stage                  # e2e | any_stage | stage:<slug>
    condition: {violation_for_minutes: 2}          # or {burn_rate: default} for objectives
    severity: warning                 # info | warning | critical
    channels: [oncall-hook, team-mail]
"""
ENV = "ONCALL_HOOK_SECRET"


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    value = secret_generate()
    monkeypatch.setenv(ENV, value)
    return value


@pytest.fixture
def browser_reads_env(settings: Settings) -> None:
    """The operator lets files applied in the browser read ONCALL_* variables."""
    settings.CONFIG_SECRET_ENV_PREFIXES = ["ONCALL_"]


@pytest.fixture
def rag(world: TeamWorld) -> Pipeline:
    pipeline = make_pipeline(
        world.team,
        "rag-chat",
        name="RAG chat",
        objective_target=Decimal("99.0"),
        objective_threshold_ms=4000,
    )
    make_stage(pipeline, "retrieval", name="Retrieval", budget_ms=350)
    make_stage(pipeline, "generation", name="Generation", budget_ms=1200)
    return pipeline


def budgets(*args: str) -> str:
    out = io.StringIO()
    call_command("budgets", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def write(tmp_path: Path, text: str, name: str = "budgets.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def changes(out: str) -> list[str]:
    return [line for line in out.splitlines() if line[:1] in "+-~"]


def plan_lines(text: str, *, prune: bool = False) -> list[str]:
    return config_apply(
        document=parse_document(text, environment=COMMAND_LINE), prune=prune, dry_run=True
    ).render()


def errors(text: str) -> list[tuple[int, str]]:
    with pytest.raises(ConfigInvalid) as caught:
        config_apply(document=parse_document(text, environment=COMMAND_LINE), dry_run=True)
    return [(error.line, error.message) for error in caught.value.errors]


def alert_file(body: str) -> str:
    """A file whose alerts section is ``body``; line 3 is body's first line."""
    return "team: acme\nalerts:\n" + textwrap.dedent(body)


def channel_file(body: str) -> str:
    """A file whose channels section is ``body``; line 3 is body's first line."""
    return "team: acme\nchannels:\n" + textwrap.dedent(body)


def test_the_sections_apply_pipelines_then_channels_then_alerts():
    assert [section.key for section in sections()] == ["pipelines", "channels", "alerts"]


@pytest.fixture
def extra_sections() -> Iterator[Callable[[str], Section]]:
    added: list[str] = []

    def section(key: str) -> Section:
        added.append(key)
        return Section(key, lambda item, reader: None, lambda t, s, o: Plan(), lambda t, o: None)

    yield section
    for key in added:
        section_unregister(key)


def test_a_registered_section_comes_after_the_one_it_names(extra_sections):
    section_register(extra_sections("late"), after="alerts")
    section_register(extra_sections("early"), after="pipelines")

    keys = [section.key for section in sections()]

    assert keys.index("early") > keys.index("pipelines")
    assert keys.index("late") > keys.index("alerts")
    assert keys.count("alerts") == 1


def test_registering_a_key_again_replaces_it(extra_sections):
    section_register(extra_sections("again"))
    replacement = extra_sections("again")
    section_register(replacement)

    assert [s for s in sections() if s.key == "again"] == [replacement]


def test_a_section_after_an_unknown_one_is_an_error(extra_sections):
    section_register(extra_sections("orphan"), after="nowhere")

    with pytest.raises(LookupError, match="“nowhere” \\(for “orphan”\\)"):
        sections()


def test_the_built_in_section_cannot_be_replaced():
    with pytest.raises(ValueError, match="built-in"):
        section_register(Section("pipelines", lambda i, r: None, lambda t, s, o: Plan(), print))


INVALID = [
    pytest.param(
        channel_file("- slug: a\n  kind: email\n  to: [a@example.com]\n  too: x\n"),
        6,
        "Unknown key “too” in channel. Did you mean “to”?",
        id="unknown-channel-key",
    ),
    pytest.param(
        channel_file("- slug: a\n  kind: sms\n"),
        4,
        "Unknown kind “sms”; use one of email, webhook.",
        id="bad-kind",
    ),
    pytest.param(
        channel_file("- slug: a\n  kind: webhook\n  url: ftp://hooks.example.com/x\n"),
        5,
        "“url”: “ftp://hooks.example.com/x” is not an http:// or https:// URL.",
        id="bad-url",
    ),
    pytest.param(
        channel_file("- slug: a\n  kind: webhook\n"),
        3,
        "A webhook channel needs “url”.",
        id="webhook-without-url",
    ),
    pytest.param(
        channel_file("- slug: a\n  kind: email\n  to: [oncall@example.com, oncall]\n"),
        5,
        "“oncall” is not an e-mail address.",
        id="bad-email",
    ),
    pytest.param(
        channel_file("- slug: a\n  kind: email\n  to: [a@example.com, A@example.com]\n"),
        5,
        "Duplicate address “A@example.com” (first at line 5).",
        id="duplicate-email",
    ),
    pytest.param(
        channel_file("- slug: a\n  kind: email\n  to: []\n"),
        5,
        "“to” needs at least one address.",
        id="no-email",
    ),
    pytest.param(
        channel_file("- slug: a\n  kind: email\n  to: [a@example.com]\n  url: https://x.io\n"),
        6,
        "“url” is only for webhooks, not email channels.",
        id="url-on-an-email-channel",
    ),
    pytest.param(
        channel_file("- slug: a\n  kind: webhook\n  url: https://x.io\n  secret_env: 1BAD\n"),
        6,
        "“1BAD” is not an environment variable name",
        id="bad-env-name",
    ),
    pytest.param(
        channel_file(
            "- {slug: a, kind: email, to: a@x.io}\n- {slug: a, kind: email, to: b@x.io}\n"
        ),
        4,
        "Duplicate channel slug “a” (first at line 3).",
        id="duplicate-channel",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  severty: critical\n"),
        5,
        "Unknown key “severty” in alert. Did you mean “severity”?",
        id="unknown-alert-key",
    ),
    pytest.param(
        alert_file("- slug: a\n"),
        3,
        "Alert is missing the required key “pipeline”.",
        id="alert-without-pipeline",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  scope: any_stages\n"),
        5,
        "Unknown scope “any_stages”; use one of e2e, any_stage, stage:<slug>."
        " Did you mean “any_stage”?",
        id="bad-scope",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  scope: 'stage:'\n"),
        5,
        "does not name a stage",
        id="stage-scope-without-slug",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  severity: page\n"),
        5,
        "Unknown severity “page”; use one of info, warning, critical.",
        id="bad-severity",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  condition: {violation_for: 2}\n"),
        5,
        "Unknown key “violation_for” in condition. Did you mean “violation_for_minutes”?",
        id="unknown-condition-key",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  condition: {violation_for_minutes: -1}\n"),
        5,
        "“violation_for_minutes” must be a whole number of minutes between 0 and 1440.",
        id="negative-minutes",
    ),
    pytest.param(
        alert_file(
            "- slug: a\n  pipeline: p\n  condition: {violation_for_minutes: 1, factor: 0.5}\n"
        ),
        5,
        "“factor” must be between 1 and 100 times the budget, not 0.5.",
        id="factor-below-one",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  condition: {}\n"),
        5,
        "A condition needs violation_for_minutes",
        id="empty-condition",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  condition: {burn_rate: default, factor: 2}\n"),
        5,
        "not both",
        id="burn-rate-and-violation",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  condition: {burn_rate: fast}\n"),
        5,
        "“burn_rate” is default or a list of windows",
        id="bad-burn-rate",
    ),
    pytest.param(
        alert_file(
            "- slug: a\n  pipeline: p\n  condition:\n    burn_rate:\n"
            "      - {long: 1x, short: 5m, factor: 14.4}\n"
        ),
        7,
        "“long” must be a duration such as 5m, 1h, 6h or 3d, not “1x”.",
        id="bad-burn-duration",
    ),
    pytest.param(
        alert_file(
            "- slug: a\n  pipeline: p\n  condition:\n    burn_rate:\n"
            "      - {long: 5m, short: 1h, factor: 14.4}\n"
        ),
        6,
        "Burn window 1: the short window must be at least 60 s and shorter than the long one",
        id="short-window-longer-than-long",
    ),
    pytest.param(
        alert_file(
            "- slug: a\n  pipeline: p\n  condition:\n    burn_rate:\n"
            "      - {long: 1h, short: 5m}\n"
        ),
        7,
        "Burn-rate window is missing the required key “factor”.",
        id="burn-window-without-factor",
    ),
    pytest.param(
        alert_file(
            "- slug: a\n  pipeline: p\n  scope: any_stage\n  condition: {burn_rate: default}\n"
        ),
        5,
        "use scope e2e",
        id="burn-rate-on-stages",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  renotify: 4 hours\n"),
        5,
        "“renotify” must be a duration such as 5m, 1h, 6h or 3d, not “4 hours”.",
        id="bad-renotify",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  renotify: 90s\n"),
        5,
        "“renotify” is in whole minutes",
        id="renotify-in-seconds",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  no_data_after: 900\n"),
        5,
        "“no_data_after” must be a duration such as 5m, 1h, 6h or 3d, not a number.",
        id="no-data-after-without-unit",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  no_data_after: 10s\n"),
        5,
        "“no_data_after” must be between 30s and 1d.",
        id="no-data-after-too-short",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  no_data: ignore\n"),
        5,
        "Unknown no_data “ignore”; use one of resolve, keep, notify.",
        id="bad-no-data",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  enabled: maybe\n"),
        5,
        "“enabled” must be true or false.",
        id="bad-boolean",
    ),
    pytest.param(
        alert_file("- slug: a\n  pipeline: p\n  channels: [x, x]\n"),
        5,
        "Duplicate channel “x” in this alert (first at line 5).",
        id="duplicate-alert-channel",
    ),
]


@pytest.mark.parametrize(("text", "line", "message"), INVALID)
def test_invalid_sections_are_rejected_with_line_and_reason(text: str, line: int, message: str):
    with pytest.raises(ConfigInvalid) as caught:
        parse_document(text, environment=COMMAND_LINE)

    found = [(e.line, e.message) for e in caught.value.errors]
    assert any(at == line and message in said for at, said in found), found


def test_an_unset_secret_variable_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(ENV, raising=False)

    with pytest.raises(ConfigInvalid) as caught:
        parse_document(ISSUE, environment=COMMAND_LINE)

    [error] = caught.value.errors
    assert error.line == 6
    assert error.message.startswith("The environment variable “ONCALL_HOOK_SECRET” is not set")


def test_a_variable_that_holds_no_signing_secret_is_an_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV, "hunter2")

    with pytest.raises(ConfigInvalid) as caught:
        parse_document(ISSUE, environment=COMMAND_LINE)

    [error] = caught.value.errors
    assert error.line == 6
    assert "does not hold a signing secret" in error.message
    assert "hunter2" not in error.message


def test_the_issues_example_is_accepted_as_written(world: TeamWorld, rag: Pipeline, secret: str):
    # Whether hooks.example.com resolves here is the network's business: its note aside.
    assert [line for line in plan_lines(ISSUE) if not line.startswith("! ")] == [
        "+ channel oncall-hook",
        "+ channel team-mail",
        "+ alert stage-over-budget",
    ]


def test_unknown_pipeline_stage_and_channel_are_errors_at_their_lines(
    world: TeamWorld, rag: Pipeline
):
    text = alert_file("""\
        - slug: a
          pipeline: rag-chta
        - slug: b
          pipeline: rag-chat
          scope: stage:retreival
          channels: [team-mial]
        """)
    email_channel(world.team, "team-mail")

    assert errors(text) == [
        (4, "Unknown pipeline “rag-chta”: neither this team nor the file has it."
            " Did you mean “rag-chat”?"),
        (7, "Pipeline “rag-chat” has no stage “retreival”. Did you mean “retrieval”?"),
        (8, "Unknown channel “team-mial”: neither this team nor the file has it."
            " Did you mean “team-mail”?"),
    ]  # fmt: skip


def test_burn_rate_on_a_pipeline_without_objective_is_an_error(world: TeamWorld):
    make_pipeline(world.team, "search")
    text = alert_file("- slug: a\n  pipeline: search\n  condition: {burn_rate: default}\n")

    [(line, message)] = errors(text)

    assert line == 5
    assert message.startswith("Pipeline “search” has no objective, so it has no burn rate")


def test_references_may_point_at_what_the_same_file_creates(world: TeamWorld, tmp_path):
    text = """\
        team: acme
        pipelines:
          - slug: search
            name: Search
            budget: {p95: 900}
            objective: {target: 99.5, threshold_ms: 1500}
            stages: [{slug: rerank, name: Rerank, budget: {p95: 200}}]
        channels:
          - {slug: team-mail, kind: email, to: [oncall@example.com]}
        alerts:
          - slug: rerank-slow
            pipeline: search
            scope: stage:rerank
            channels: [team-mail]
          - slug: burning
            pipeline: search
            condition: {burn_rate: default}
            severity: critical
            channels: [team-mail]
        """

    out = budgets("apply", write(tmp_path, text))

    assert changes(out) == [
        "+ pipeline search",
        "+ stage search/rerank",
        "+ channel team-mail",
        "+ alert rerank-slow",
        "+ alert burning",
    ]
    rerank = AlertRule.objects.get(slug="rerank-slow")
    assert (rerank.scope, rerank.stage.slug if rerank.stage else None) == ("stage", "rerank")
    assert [c.slug for c in rerank.channels.all()] == ["team-mail"]
    burning = AlertRule.objects.get(slug="burning")
    assert (burning.condition, burning.burn_windows, burning.severity) == (
        "burn_rate",
        [],
        Severity.CRITICAL,
    )


def test_a_stage_the_file_removes_cannot_be_watched(world: TeamWorld, rag: Pipeline):
    text = """\
        team: acme
        pipelines:
          - slug: rag-chat
            name: RAG chat
            budget: {p95: 2500}
            stages: [{slug: retrieval, name: Retrieval, budget: {p95: 350}}]
        alerts:
          - {slug: a, pipeline: rag-chat, scope: "stage:generation"}
        """

    assert errors(textwrap.dedent(text)) == [
        (8, "Pipeline “rag-chat” has no stage “generation” (the file removes it).")
    ]


def test_with_prune_a_pipeline_missing_from_the_file_cannot_be_watched(world: TeamWorld, rag):
    text = "team: acme\npipelines: []\nalerts:\n  - {slug: a, pipeline: rag-chat}\n"

    with pytest.raises(ConfigInvalid) as caught:
        config_apply(
            document=parse_document(text, environment=COMMAND_LINE), prune=True, dry_run=True
        )

    assert [(e.line, e.message) for e in caught.value.errors] == [
        (4, "Pipeline “rag-chat” is not in the file, and --prune deletes it.")
    ]
    # Without prune the pipeline stays, and so may be watched.
    assert "+ alert a" in plan_lines(text)


def test_apply_creates_channels_and_rules_through_the_services(
    world: TeamWorld, rag: Pipeline, secret: str, tmp_path
):
    out = budgets("apply", write(tmp_path, ISSUE))

    assert "Applied 3 changes." in out
    hook = Channel.objects.get(team=world.team, slug="oncall-hook")
    assert (hook.kind, hook.url, hook.format) == (
        "webhook",
        "https://hooks.example.com/latency",
        "native",
    )
    assert (hook.secret, hook.secret_env) == (secret, ENV)
    mail = Channel.objects.get(team=world.team, slug="team-mail")
    assert (mail.kind, mail.email_to) == ("email", ["oncall@example.com"])
    alert = AlertRule.objects.get(team=world.team, slug="stage-over-budget")
    assert alert.pipeline == rag
    assert (alert.scope, alert.condition, alert.violation_for_minutes) == (
        RuleScope.ANY_STAGE,
        "violation",
        2,
    )
    assert (alert.severity, alert.renotify_minutes, alert.no_data_after_s) == ("warning", 240, None)
    assert sorted(c.slug for c in alert.channels.all()) == ["oncall-hook", "team-mail"]
    assert secret not in out
    assert budgets("apply", write(tmp_path, ISSUE)).strip() == "No changes."


def test_every_optional_key_reaches_the_rule(world: TeamWorld, rag: Pipeline, tmp_path):
    text = """\
        team: acme
        channels:
          - {slug: pager, name: Pager, kind: webhook, url: "https://pager.example.com/", format: alertmanager}
        alerts:
          - slug: slow
            name: Retrieval is slow
            pipeline: rag-chat
            scope: stage:retrieval
            condition: {violation_for_minutes: 5, factor: 1.5}
            severity: info
            channels: [pager]
            renotify: never
            notify_on_resolve: false
            no_data: notify
            no_data_after: 15m
            enabled: false
          - slug: burn
            pipeline: rag-chat
            condition:
              burn_rate:
                - {long: 1h, short: 5m, factor: 14.4, severity: critical}
                - {long: 3d, short: 6h, factor: 1}
            renotify: 1h30m
        """  # noqa: E501

    budgets("apply", write(tmp_path, text))

    pager = Channel.objects.get(slug="pager")
    assert (pager.name, pager.format) == ("Pager", "alertmanager")
    assert pager.secret.startswith("whsec_")
    assert pager.secret_env == ""
    slow = AlertRule.objects.get(slug="slow")
    assert (slow.name, slow.stage.slug if slow.stage else None) == (
        "Retrieval is slow",
        "retrieval",
    )
    assert (slow.violation_for_minutes, slow.violation_factor) == (5, Decimal("1.5"))
    assert (slow.severity, slow.renotify_minutes, slow.notify_on_resolve) == ("info", 0, False)
    assert (slow.no_data, slow.no_data_after_s, slow.enabled) == ("notify", 900, False)
    burn = AlertRule.objects.get(slug="burn")
    assert burn.burn_windows == [
        {"long_s": 3600, "short_s": 300, "factor": 14.4, "severity": "critical"},
        {"long_s": 259200, "short_s": 21600, "factor": 1.0, "severity": "warning"},
    ]
    assert burn.renotify_minutes == 90
    assert budgets("apply", write(tmp_path, text)).strip() == "No changes."


UPDATES = [
    ("url: https://hooks.example.com/latency", "url: https://hooks.example.com/v2",
     '~ channel oncall-hook: url "https://hooks.example.com/latency" -> '
     '"https://hooks.example.com/v2"'),
    ("format: native", "format: slack", "~ channel oncall-hook: format native -> slack"),
    ("    kind: email\n", "    name: Team mail\n    kind: email\n",
     '~ channel team-mail: name (none) -> "Team mail"'),
    ("to: [oncall@example.com]", "to: [oncall@example.com, sre@example.com]",
     "~ channel team-mail: to oncall@example.com -> oncall@example.com, sre@example.com"),
    ("scope: any_stage", "scope: stage:retrieval",
     "~ alert stage-over-budget: scope any_stage -> stage:retrieval"),
    ("{violation_for_minutes: 2}", "{violation_for_minutes: 5, factor: 1.25}",
     "~ alert stage-over-budget: condition violation for 2 min -> "
     "violation for 5 min at 1.25x budget"),
    ("severity: warning", "severity: critical",
     "~ alert stage-over-budget: severity warning -> critical"),
    ("channels: [oncall-hook, team-mail]", "channels: [team-mail]",
     "~ alert stage-over-budget: channels oncall-hook, team-mail -> team-mail"),
    ("    severity: warning", "    renotify: 30m\n    severity: warning",
     "~ alert stage-over-budget: renotify 4h -> 30m"),
    ("    severity: warning", "    notify_on_resolve: false\n    severity: warning",
     "~ alert stage-over-budget: notify_on_resolve true -> false"),
    ("    severity: warning", "    no_data: keep\n    severity: warning",
     "~ alert stage-over-budget: no_data resolve -> keep"),
    ("    severity: warning", "    no_data_after: 1h\n    severity: warning",
     "~ alert stage-over-budget: no_data_after (default) -> 1h"),
    ("    severity: warning", "    enabled: false\n    severity: warning",
     "~ alert stage-over-budget: enabled true -> false"),
    ("pipeline: rag-chat", "pipeline: search",
     "~ alert stage-over-budget: pipeline rag-chat -> search"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "expected"), UPDATES)
def test_updates_are_detected_key_by_key(
    world: TeamWorld, rag: Pipeline, secret: str, tmp_path, old: str, new: str, expected: str
):
    make_stage(make_pipeline(world.team, "search"), "retrieval")
    budgets("apply", write(tmp_path, ISSUE))
    changed = ISSUE.replace(old, new, 1)
    assert changed != ISSUE

    out = budgets("apply", write(tmp_path, changed, "changed.yaml"))

    assert changes(out)[0] == expected
    assert budgets("apply", write(tmp_path, changed, "changed.yaml")).strip() == "No changes."


def test_updated_values_reach_the_database(world, rag, secret, tmp_path):
    budgets("apply", write(tmp_path, ISSUE))
    changed = (
        ISSUE.replace("format: native", "format: slack")
        .replace("[oncall@example.com]", "[sre@example.com]")
        .replace("scope: any_stage", "scope: stage:generation")
        .replace("channels: [oncall-hook, team-mail]", "channels: [oncall-hook]")
    )

    budgets("apply", write(tmp_path, changed))

    assert Channel.objects.get(slug="oncall-hook").format == "slack"
    assert Channel.objects.get(slug="team-mail").email_to == ["sre@example.com"]
    alert = AlertRule.objects.get(slug="stage-over-budget")
    assert alert.stage == Stage.objects.get(slug="generation")
    assert [c.slug for c in alert.channels.all()] == ["oncall-hook"]


def test_channels_and_rules_missing_from_the_file_are_left_alone_without_prune(
    world: TeamWorld, rag: Pipeline, tmp_path
):
    legacy = email_channel(world.team, "legacy-mail")
    rule(rag, [legacy], slug="legacy-rule")
    text = "team: acme\nchannels: []\nalerts: []\n"

    out = budgets("apply", write(tmp_path, text))

    assert out.splitlines() == [
        "No changes.",
        "= channel legacy-mail: not in the file, left alone (--prune deletes it)",
        "= alert legacy-rule: not in the file, left alone (--prune deletes it)",
    ]
    assert Channel.objects.filter(slug="legacy-mail").exists()
    assert AlertRule.objects.filter(slug="legacy-rule").exists()


def test_prune_deletes_channels_and_rules_missing_from_the_file(world, rag, tmp_path):
    legacy = email_channel(world.team, "legacy-mail")
    rule(rag, [legacy], slug="legacy-rule")
    elsewhere = make_pipeline(world.other_team, "rag-chat")
    rule(elsewhere, [email_channel(world.other_team, "legacy-mail")], slug="legacy-rule")
    text = "team: acme\nchannels: []\nalerts: []\n"

    out = budgets("apply", write(tmp_path, text), "--prune")

    assert changes(out) == ["- channel legacy-mail", "- alert legacy-rule"]
    assert not Channel.objects.filter(team=world.team).exists()
    assert not AlertRule.objects.filter(team=world.team).exists()
    assert AlertRule.objects.filter(team=world.other_team, slug="legacy-rule").exists()


def test_a_kind_change_replaces_the_channel_and_keeps_its_rules(world, rag, secret, tmp_path):
    mail = email_channel(world.team, "oncall-hook")
    rule(rag, [mail], slug="kept")
    text = channel_file(
        "- slug: oncall-hook\n  kind: webhook\n  url: https://hooks.example.com/x\n"
        f"  secret_env: {ENV}\n"
    )

    out = budgets("apply", write(tmp_path, text))

    assert changes(out) == [
        "~ channel oncall-hook: kind email -> webhook (replaced: its delivery history is deleted)"
    ]
    hook = Channel.objects.get(slug="oncall-hook")
    assert (hook.kind, hook.secret) == (ChannelKind.WEBHOOK, secret)
    assert list(AlertRule.objects.get(slug="kept").channels.all()) == [hook]


def test_the_secret_comes_from_the_environment_and_never_into_the_export(
    world: TeamWorld, rag: Pipeline, secret: str, tmp_path
):
    budgets("apply", write(tmp_path, ISSUE))

    exported = budgets("export", "--team", "acme")

    assert secret not in exported
    assert "secret_env: ONCALL_HOOK_SECRET" in exported
    assert "whsec_" not in exported
    assert Channel.objects.get(slug="oncall-hook").secret == secret


def test_a_new_secret_is_a_change_that_never_shows_the_secret(
    world: TeamWorld, rag: Pipeline, secret: str, tmp_path, monkeypatch
):
    budgets("apply", write(tmp_path, ISSUE))
    rotated = secret_generate()
    monkeypatch.setenv(ENV, rotated)

    out = budgets("apply", write(tmp_path, ISSUE))

    assert changes(out) == ["~ channel oncall-hook: secret changed (from ONCALL_HOOK_SECRET)"]
    assert rotated not in out
    assert secret not in out
    assert Channel.objects.get(slug="oncall-hook").secret == rotated


def test_the_plan_digest_changes_with_the_secret_value(
    world: TeamWorld, rag: Pipeline, secret: str, monkeypatch, browser_reads_env: None
):
    first = config_preview(team=world.team, text=ISSUE, prune=False)
    again = config_preview(team=world.team, text=ISSUE, prune=False)
    monkeypatch.setenv(ENV, secret_generate())
    other = config_preview(team=world.team, text=ISSUE, prune=False)

    assert first.changes == other.changes
    assert first.digest() == again.digest()
    assert first.digest() != other.digest()


def test_a_webhook_without_secret_env_keeps_its_secret(world: TeamWorld, secret: str, tmp_path):
    hook = webhook_channel(world.team, "oncall-hook", secret=secret, secret_env=ENV)
    text = channel_file(
        "- {slug: oncall-hook, kind: webhook, url: 'https://hooks.example.com/x'}\n"
    )

    out = budgets("apply", write(tmp_path, text))

    assert changes(out) == [
        '~ channel oncall-hook: secret_env "ONCALL_HOOK_SECRET" -> (none)'
        " (the current secret stays)"
    ]
    hook.refresh_from_db()
    assert (hook.secret, hook.secret_env) == (secret, "")


def test_export_then_apply_changes_nothing(world: TeamWorld, rag: Pipeline, secret, tmp_path):
    hook = webhook_channel(
        world.team, "oncall-hook", name="On call", format="slack", secret=secret, secret_env=ENV
    )
    plain = webhook_channel(world.team, "plain-hook", url="https://hooks.example.com/plain")
    mail = email_channel(world.team, "team-mail", email_to=["a@example.com", "b@example.com"])
    retrieval = rag.stages.get(slug="retrieval")
    rule(rag, [hook, mail], slug="e2e-slow", name="Slow", violation_for_minutes=3)
    rule(
        rag,
        [mail],
        slug="retrieval-slow",
        scope=RuleScope.STAGE,
        stage=retrieval,
        violation_factor=Decimal("1.75"),
        severity=Severity.INFO,
        renotify_minutes=0,
        notify_on_resolve=False,
        no_data="notify",
        no_data_after_s=5400,
        enabled=False,
    )
    rule(rag, [plain], slug="burn-default", condition="burn_rate", renotify_minutes=45)
    rule(
        rag,
        [],
        slug="burn-custom",
        condition="burn_rate",
        burn_windows=[{"long_s": 7200, "short_s": 600, "factor": 10, "severity": "critical"}],
    )
    exported = budgets("export", "--team", "acme")

    out = budgets("apply", write(tmp_path, exported))

    assert out.strip() == "No changes."
    assert secret not in exported
    assert plain.secret not in exported
    assert "renotify: never" in exported
    assert "renotify: 45m" in exported
    assert "no_data_after: 1h30m" in exported
    assert "burn_rate: default" in exported
    assert "scope: stage:retrieval" in exported


def test_a_percentile_condition_is_exported_and_applied_back_unchanged(
    world: TeamWorld, rag: Pipeline, tmp_path
):
    rule(
        rag,
        [],
        slug="page",
        scope=RuleScope.ANY_STAGE,
        violation_for_minutes=1,
        violation_percentile="p99",
    )
    exported = budgets("export", "--team", "acme")

    out = budgets("apply", write(tmp_path, exported))

    assert "percentile: p99" in exported
    assert out.strip() == "No changes."
    edited = exported.replace("percentile: p99", "percentile: p95")
    changed = budgets("apply", write(tmp_path, edited), "--dry-run")
    assert "p99 violation for 1 min" in changed
    assert "p95 violation for 1 min" in changed


def test_export_leaves_the_sections_out_when_the_team_has_none(world: TeamWorld):
    make_pipeline(world.team, "bare", name="Bare", budget={"p95": 1000})

    exported = config_export(team=world.team)

    assert "channels" not in exported
    assert "alerts" not in exported


def test_export_writes_alerts_minimally(world: TeamWorld, rag: Pipeline):
    mail = email_channel(world.team, "team-mail", email_to=["oncall@example.com"])
    rule(rag, [mail], slug="slow", violation_for_minutes=2)

    exported = config_export(team=world.team)

    assert exported.split("channels:\n", 1)[1] == textwrap.dedent("""\
          - slug: team-mail
            kind: email
            to:
              - oncall@example.com
        alerts:
          - slug: slow
            pipeline: rag-chat
            condition:
              violation_for_minutes: 2
            channels:
              - team-mail
        """)


def test_a_file_with_only_channels_and_alerts_leaves_pipelines_alone(
    world: TeamWorld, rag: Pipeline, secret: str, tmp_path
):
    make_rule(rag.stages.get(slug="retrieval"), span_name="vector*")
    make_pipeline(world.team, "other")
    before = [list(model.objects.order_by("pk").values()) for model in (Pipeline, Stage, SpanRule)]

    out = budgets("apply", write(tmp_path, ISSUE), "--prune")

    assert changes(out) == [
        "+ channel oncall-hook",
        "+ channel team-mail",
        "+ alert stage-over-budget",
    ]
    assert "pipeline" not in out
    after = [list(model.objects.order_by("pk").values()) for model in (Pipeline, Stage, SpanRule)]
    assert after == before


def test_a_rule_whose_stage_the_file_deletes_is_created_again(world, rag, tmp_path):
    retrieval = rag.stages.get(slug="retrieval")
    rule(rag, [], slug="watch", scope=RuleScope.STAGE, stage=retrieval)
    text = """\
        team: acme
        pipelines:
          - slug: rag-chat
            name: RAG chat
            budget: {p95: 2500}
            objective: {target: 99.0, threshold_ms: 4000}
            stages: [{slug: generation, name: Generation, budget: {p95: 1200}}]
        alerts:
          - {slug: watch, pipeline: rag-chat, scope: e2e}
        """

    out = budgets("apply", write(tmp_path, text))

    assert changes(out) == [
        "- stage rag-chat/retrieval",
        "~ alert watch: scope stage:retrieval -> e2e",
    ]
    watch = AlertRule.objects.get(slug="watch")
    assert (watch.scope, watch.stage) == (RuleScope.E2E, None)


def test_a_service_error_is_reported_at_its_line_and_changes_nothing(
    world, rag, secret, tmp_path, monkeypatch
):
    def refusing(**kwargs: object) -> None:
        raise ValidationError({"slug": ["Refused for the test."]})

    monkeypatch.setattr(alerts_plan, "alert_rule_create", refusing)

    with pytest.raises(CommandError, match=r"budgets.yaml:12: Cannot apply “\+ alert stage-over"):
        budgets("apply", write(tmp_path, ISSUE))

    assert not Channel.objects.exists()


def test_channels_are_written_by_the_channel_services(world, secret, tmp_path, monkeypatch):
    created: list[str] = []
    real_create = channels_plan.channel_create

    def recording(**kwargs: Any) -> Channel:
        created.append(kwargs["slug"])
        return real_create(**kwargs)

    monkeypatch.setattr(channels_plan, "channel_create", recording)

    budgets("apply", write(tmp_path, ISSUE.split("alerts:")[0]))

    assert created == ["oncall-hook", "team-mail"]


def test_the_command_prints_file_line_reason_for_a_reference(world, rag, tmp_path):
    text = alert_file("- {slug: a, pipeline: rag-chat, channels: [nowhere]}\n")
    stderr = io.StringIO()

    with pytest.raises(CommandError, match="1 error in") as caught:
        call_command("budgets", "apply", write(tmp_path, text), stdout=io.StringIO(), stderr=stderr)

    assert "nothing was changed" in str(caught.value)
    assert re.search(r"budgets\.yaml:3: Unknown channel “nowhere”", stderr.getvalue())
    assert not AlertRule.objects.exists()


def test_the_command_reports_an_unset_secret_variable(world, tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    stderr = io.StringIO()

    path = write(tmp_path, ISSUE)

    with pytest.raises(CommandError):
        call_command("budgets", "apply", path, "--dry-run", stdout=io.StringIO(), stderr=stderr)

    assert "budgets.yaml:6: The environment variable “ONCALL_HOOK_SECRET” is not set" in (
        stderr.getvalue()
    )


# The config page.


def page_url() -> str:
    return reverse("config:page", kwargs={"team_slug": "acme"})


def apply_url() -> str:
    return reverse("config:apply", kwargs={"team_slug": "acme"})


def preview(client: Client, text: str = ISSUE) -> tuple[int, str, str]:
    response = client.post(page_url(), {"text": text})
    body = response.content.decode()
    match = re.search(r'name="token" value="([^"]+)"', body)
    return response.status_code, body, match.group(1) if match else ""


def test_owner_previews_then_applies_channels_and_alerts_on_the_page(
    world: TeamWorld, rag: Pipeline, secret: str, browser_reads_env: None
):
    client = client_for(world.owner)

    status, body, token = preview(client)

    assert status == 200
    assert "+ channel oncall-hook" in body
    assert "+ alert stage-over-budget" in body
    assert secret not in body
    assert not Channel.objects.exists()

    response = client.post(apply_url(), {"token": token}, follow=True)

    assert "Applied 3 changes." in response.content.decode()
    assert Channel.objects.get(slug="oncall-hook").secret == secret
    assert AlertRule.objects.filter(slug="stage-over-budget").exists()
    page = client.get(page_url()).content.decode()
    assert "secret_env: ONCALL_HOOK_SECRET" in page
    assert secret not in page


def test_a_secret_changed_since_the_preview_is_not_applied(
    world, rag, secret, monkeypatch, browser_reads_env
):
    client = client_for(world.owner)
    _, _, token = preview(client)
    monkeypatch.setenv(ENV, secret_generate())

    response = client.post(apply_url(), {"token": token})

    assert "The configuration changed since your preview." in response.content.decode()
    assert not Channel.objects.exists()


def test_the_page_shows_reference_errors_with_their_lines(world: TeamWorld, secret: str):
    status, body, token = preview(client_for(world.owner))

    assert status == 422
    assert "Line 13: Unknown pipeline “rag-chat”" in body
    assert token == ""


def test_viewer_gets_403_on_preview_and_apply(world: TeamWorld, rag: Pipeline, secret: str):
    _, _, token = preview(client_for(world.owner))
    client = client_for(world.viewer)

    assert client.post(page_url(), {"text": ISSUE}).status_code == 403
    assert client.post(apply_url(), {"token": token}).status_code == 403
    assert not Channel.objects.exists()


def test_outsider_gets_404(world: TeamWorld, rag: Pipeline, secret: str):
    client = client_for(world.outsider)

    assert client.post(page_url(), {"text": ISSUE}).status_code == 404
    assert client.post(apply_url(), {"token": "x"}).status_code == 404
    assert not Channel.objects.exists()
