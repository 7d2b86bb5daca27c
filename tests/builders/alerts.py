"""Hand-made violations, channels and rules for the alert tests, with known times."""

from datetime import datetime, timedelta
from typing import Any

from apps.alerts.models import AlertRule, Channel, ChannelKind, ChannelRecipient
from apps.alerts.services.channels import channel_create
from apps.alerts.services.recipients import recipient_answer
from apps.alerts.services.rules import alert_rule_create
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import Violation
from apps.teams.models import Team
from tests.builders.evaluation_rollups import T0, put_requests

NOW = T0 + timedelta(days=3)


def email_channel(team: Team, slug: str = "team-mail", **fields: Any) -> Channel:
    fields.setdefault("email_to", [f"oncall@{team.slug}.example.com"])
    return channel_create(team=team, slug=slug, kind=ChannelKind.EMAIL, **fields)


def confirmed(channel: Channel, *addresses: str) -> Channel:
    """The channel's addresses (or these of them) answered yes to their confirmation."""
    for recipient in ChannelRecipient.objects.filter(channel=channel):
        if not addresses or recipient.email in addresses:
            recipient_answer(recipient=recipient, confirm=True)
    return channel


def webhook_channel(
    team: Team, slug: str = "oncall-hook", url: str = "https://hooks.example.com/x", **fields: Any
) -> Channel:
    return channel_create(team=team, slug=slug, kind=ChannelKind.WEBHOOK, url=url, **fields)


def rule(
    pipeline: Pipeline, channels: list[Channel], slug: str = "over-budget", **fields: Any
) -> AlertRule:
    return alert_rule_create(
        team=pipeline.team, pipeline=pipeline, slug=slug, channels=channels, **fields
    )


def violation(
    pipeline: Pipeline,
    stage: Stage | None = None,
    *,
    observed_ms: float,
    budget_ms: int | None = None,
    percentile: str = "p95",
    opened_at: datetime = NOW,
    evaluated_at: datetime | None = None,
    trace_ids: list[str] | None = None,
) -> Violation:
    """An open violation as the budget evaluation leaves it."""
    if budget_ms is None:
        budget_ms = stage.budget_ms if stage is not None else pipeline.budget[percentile]
    assert budget_ms is not None
    return Violation.objects.create(
        team_id=pipeline.team_id,
        pipeline=pipeline,
        stage=stage,
        percentile=percentile,
        budget_ms=budget_ms,
        window_s=pipeline.evaluation_window_s,
        observed_ms=observed_ms,
        peak_ms=observed_ms,
        sample_count=40,
        opened_at=opened_at,
        last_evaluated_at=evaluated_at or opened_at,
        example_trace_ids=trace_ids or ["ab" * 16],
    )


def follow(violation: Violation, *, at: datetime, observed_ms: float | None = None) -> None:
    """The budget evaluation's tick over an open violation at ``at``."""
    violation.last_evaluated_at = at
    if observed_ms is not None:
        violation.observed_ms = observed_ms
        violation.peak_ms = max(violation.peak_ms, observed_ms)
    violation.save()


def close(violation: Violation, *, at: datetime) -> None:
    violation.closed_at = at
    violation.last_evaluated_at = at
    violation.save()


def requests(pipeline: Pipeline, ago: timedelta, *, total: int, good: int) -> None:
    """``total`` requests, ``good`` of them within the objective, ``ago`` before NOW."""
    put_requests(pipeline, NOW - ago, total=total, good=good)
