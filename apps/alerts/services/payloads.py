"""The payload of a notification: built once when it is written, sent as is on every try."""

import hashlib
from datetime import datetime
from typing import Any

from django.conf import settings
from django.urls import reverse

from apps.alerts.formats import text
from apps.alerts.models import AlertRule, Incident, NotificationEvent
from apps.alerts.payload_types import Links, Named, Payload, StageShare
from apps.core.figures import format_seconds
from apps.core.time import align_down
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.selectors.percentiles import pipeline_percentiles
from apps.teams.models import Team

TOP_STAGES = 5
_TYPES = {
    NotificationEvent.FIRING: "alert.firing",
    NotificationEvent.REMINDER: "alert.firing",
    NotificationEvent.NO_DATA: "alert.no_data",
    NotificationEvent.RESOLVED: "alert.resolved",
    NotificationEvent.TEST: "alert.test",
}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def _url(path: str) -> str:
    return f"{settings.SITE_URL}{path}"


def fingerprint(*, team_slug: str, rule_slug: str, scope_key: str) -> str:
    """Stable per rule and scope, as Alertmanager's: receivers group and dedupe on it."""
    return hashlib.sha256(f"{team_slug}/{rule_slug}/{scope_key}".encode()).hexdigest()[:16]


def top_stages(*, pipeline: Pipeline, window_s: int, now: datetime) -> list[StageShare]:
    """The stages taking most of the critical path over the window ending now."""
    end = align_down(int(now.timestamp()), 10) + 10
    figures = pipeline_percentiles(
        pipeline=pipeline, start=end - window_s, end=end, critical_sketches=False
    )
    ranked = sorted(
        (s for s in figures.stages if s.share), key=lambda s: s.share or 0, reverse=True
    )[:TOP_STAGES]
    shares: list[StageShare] = []
    for item in ranked:
        percentile = item.stage.budget_percentile
        observed = item.percentiles.get(percentile)
        budget = item.stage.budget_ms
        shares.append(
            {
                "slug": item.stage.slug,
                "name": item.stage.name,
                "share": item.share,
                "percentile": percentile,
                "observed_ms": None if observed is None else round(observed, 3),
                "budget_ms": budget,
                "over_by_ms": (
                    round(observed - budget, 3)
                    if observed is not None and budget is not None and observed > budget
                    else None
                ),
            }
        )
    return shares


def summary(
    *,
    pipeline_slug: str,
    stage: Named | None,
    facts: dict[str, Any],
    resolution: str | None = None,
) -> str:
    """One line about the incident; ``resolution`` once it resolved, None while it fires."""
    where = f"stage {stage['slug']}" if stage else "end to end"
    if facts.get("measure"):  # a stream budget's: "stage generation longest chunk gap"
        where = f"{where} {facts['measure']}"
    degradation = facts.get("degradation")
    if degradation is not None:
        window_s = facts.get("window_s")
        if resolution:
            said = text.degradation_resolved_words(degradation, window_s, resolution)
        else:
            said = text.degradation_firing_words(degradation, window_s)
        return f"{pipeline_slug} · {where} {said}"
    if facts.get("percentile") is None and facts.get("objective_threshold_ms") is not None:
        objective = (
            f"its objective ({facts['objective_target']:g} % under "
            f"{text.ms(facts['objective_threshold_ms'])})"
        )
        if resolution:
            return f"{pipeline_slug} · {text.burn_resolved_words(resolution)}: {objective}"
        pairs = facts.get("burn_rates") or []
        if not pairs:
            return f"{pipeline_slug} burns {objective} too fast"
        pair = pairs[0]
        rate = pair["long_burn_rate"]
        shown = f"{rate:.1f} times the allowed rate" if rate is not None else "too fast"
        over = format_seconds(pair["long_window_s"])
        return f"{pipeline_slug} burns {objective} at {shown} over {over}"
    observed, budget = facts.get("observed_ms"), facts.get("budget_ms")
    if resolution:
        said = text.resolved_words(
            percentile=facts.get("percentile"),
            observed_ms=observed,
            budget_ms=budget,
            resolution=resolution,
        )
        return f"{pipeline_slug} · {where} {said}"
    said = text.firing_words(
        percentile=facts.get("percentile"),
        observed_ms=observed,
        peak_ms=facts.get("peak_ms"),
        budget_ms=budget,
    )
    return f"{pipeline_slug} · {where} {said}"


def incident_summary(*, incident: Incident) -> str:
    """The incident's line as its pages show it: what it fired on, or how it resolved."""
    stage = incident.stage
    return summary(
        pipeline_slug=incident.pipeline.slug,
        stage={"slug": stage.slug, "name": stage.name} if stage else None,
        facts=incident.facts,
        resolution=(incident.resolution or None) if incident.resolved_at else None,
    )


def _links(
    team: Team,
    pipeline: Pipeline,
    stage: Stage | None,
    incident_id: int | None,
    trace_ids: list[str],
) -> Links:
    if stage is not None:
        dashboard = reverse("dashboards:stage", args=[team.slug, pipeline.slug, stage.slug])
    else:
        dashboard = reverse("dashboards:pipeline", args=[team.slug, pipeline.slug])
    return {
        "dashboard": _url(dashboard),
        "incident": (
            _url(reverse("alerts:incident", args=[team.slug, incident_id]))
            if incident_id is not None
            else None
        ),
        "traces": [_url(reverse("traces:detail", args=[team.slug, t])) for t in trace_ids],
    }


def incident_payload(
    *, incident: Incident, rule: AlertRule, event: str, message_id: str, now: datetime
) -> Payload:
    """What a notification about ``incident`` says; ``rule`` may be gone (its slug stays)."""
    team, pipeline, stage = incident.team, incident.pipeline, incident.stage
    facts = incident.facts
    stage_named: Named | None = {"slug": stage.slug, "name": stage.name} if stage else None
    resolved = incident.resolved_at
    observed, budget = facts.get("observed_ms"), facts.get("budget_ms")
    return {
        "type": _TYPES[NotificationEvent(event)],
        "test": False,
        "id": message_id,
        "created_at": _iso(now) or "",
        "reminder": incident.reminders if event == NotificationEvent.REMINDER else 0,
        "team": {"slug": team.slug, "name": team.name},
        "rule": {
            "slug": incident.rule_slug,
            "name": incident.rule_name or incident.rule_slug,
            "severity": incident.severity,
            "condition": rule.condition,
            "scope": rule.scope_label,
        },
        "incident": {
            "id": incident.pk,
            "status": "resolved" if resolved else "firing",
            "started_at": _iso(incident.started_at) or "",
            "ended_at": _iso(resolved),
            "resolution": incident.resolution or None,
            "duration_s": (resolved - incident.started_at).total_seconds() if resolved else None,
            "fingerprint": fingerprint(
                team_slug=team.slug, rule_slug=incident.rule_slug, scope_key=incident.scope_key
            ),
        },
        "pipeline": {"slug": pipeline.slug, "name": pipeline.name},
        "stage": stage_named,
        "percentile": facts.get("percentile"),
        "observed_ms": observed,
        "peak_ms": facts.get("peak_ms", observed),
        "budget_ms": budget,
        "over_by_ms": (
            round(observed - budget, 3)
            if observed is not None and budget is not None and observed > budget
            else None
        ),
        "window_s": facts.get("window_s", pipeline.evaluation_window_s),
        "burn_rates": facts.get("burn_rates", []),
        "degradation": facts.get("degradation"),
        "top_stages": facts.get("top_stages", []),
        "example_trace_ids": facts.get("example_trace_ids", []),
        "links": _links(team, pipeline, stage, incident.pk, facts.get("example_trace_ids", [])),
        "summary": summary(
            pipeline_slug=pipeline.slug,
            stage=stage_named,
            facts=facts,
            resolution=(incident.resolution or None) if resolved else None,
        ),
    }


def payload_for_channel_test(
    *, team: Team, channel_slug: str, message_id: str, now: datetime
) -> Payload:
    """A firing alert about the team's first pipeline with made-up figures, marked as a
    test in its type, its ``test`` field, its rule and its summary."""
    pipeline = team.pipelines.order_by("name").first()
    stage = pipeline.stages.order_by("position").first() if pipeline else None
    pipeline_named: Named = (
        {"slug": pipeline.slug, "name": pipeline.name}
        if pipeline
        else {"slug": "example", "name": "Example pipeline"}
    )
    stage_named: Named | None = {"slug": stage.slug, "name": stage.name} if stage else None
    budget = (stage.budget_ms if stage else None) or 500
    observed = round(budget * 1.6, 3)
    facts = {"percentile": "p95", "observed_ms": observed, "budget_ms": budget}
    shares: list[StageShare] = [
        {
            "slug": stage_named["slug"] if stage_named else "retrieval",
            "name": stage_named["name"] if stage_named else "Retrieval",
            "share": 0.62,
            "percentile": "p95",
            "observed_ms": observed,
            "budget_ms": budget,
            "over_by_ms": round(observed - budget, 3),
        }
    ]
    dashboard = (
        _url(reverse("dashboards:pipeline", args=[team.slug, pipeline.slug]))
        if pipeline
        else _url(reverse("dashboards:team_home", args=[team.slug]))
    )
    return {
        "type": "alert.test",
        "test": True,
        "id": message_id,
        "created_at": _iso(now) or "",
        "reminder": 0,
        "team": {"slug": team.slug, "name": team.name},
        "rule": {
            "slug": "test",
            "name": f"Test of channel {channel_slug}",
            "severity": "info",
            "condition": "violation",
            "scope": f"stage:{stage_named['slug']}" if stage_named else "e2e",
        },
        "incident": {
            "id": None,
            "status": "firing",
            "started_at": _iso(now) or "",
            "ended_at": None,
            "resolution": None,
            "duration_s": None,
            "fingerprint": fingerprint(
                team_slug=team.slug, rule_slug="test", scope_key=channel_slug
            ),
        },
        "pipeline": pipeline_named,
        "stage": stage_named,
        "percentile": "p95",
        "observed_ms": observed,
        "peak_ms": observed,
        "budget_ms": budget,
        "over_by_ms": round(observed - budget, 3),
        "window_s": pipeline.evaluation_window_s if pipeline else 300,
        "burn_rates": [],
        "degradation": None,
        "top_stages": shares,
        "example_trace_ids": [],
        "links": {"dashboard": dashboard, "incident": None, "traces": []},
        "summary": text.TEST_PREFIX
        + summary(pipeline_slug=pipeline_named["slug"], stage=stage_named, facts=facts),
    }
