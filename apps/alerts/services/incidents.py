"""Services: incidents open when a rule fires and close when it resolves."""

from datetime import datetime
from typing import Any

from apps.alerts.models import AlertRule, AlertState, AlertStatus, Incident, Resolution
from apps.alerts.selectors.degradation_observations import degradation_followed
from apps.alerts.services.payloads import top_stages
from apps.pipelines.models import Stage


def incident_open(
    *,
    rule: AlertRule,
    scope_key: str,
    stage: Stage | None,
    severity: str,
    facts: dict[str, Any],
    now: datetime,
) -> Incident:
    facts = {
        **facts,
        "top_stages": top_stages(
            pipeline=rule.pipeline,
            window_s=facts.get("window_s") or rule.pipeline.evaluation_window_s,
            now=now,
        ),
    }
    return Incident.objects.create(
        team_id=rule.team_id,
        rule=rule,
        rule_slug=rule.slug,
        rule_name=rule.name,
        pipeline_id=rule.pipeline_id,
        stage=stage,
        scope_key=scope_key,
        severity=severity,
        started_at=now,
        facts=facts,
    )


def incident_follow(*, incident: Incident, facts: dict[str, Any], severity: str | None) -> None:
    """Keep the latest figures; the examples and breakdown stay those of the worst seen."""
    changed = []
    old = incident.facts
    merged = {**old, **{k: v for k, v in facts.items() if k in ("observed_ms", "sample_count")}}
    if "degradation" in facts:
        merged = degradation_followed(facts=merged, latest=facts)
    peak = facts.get("peak_ms")
    if peak is not None and peak > (old.get("peak_ms") or 0):
        merged.update(
            {
                k: v
                for k, v in facts.items()
                if k in ("peak_ms", "example_trace_ids", "violation_id")
            }
        )
    if "burn_rates" in facts:
        merged["burn_rates"] = facts["burn_rates"]
    if merged != old:
        incident.facts = merged
        changed.append("facts")
    if severity is not None and severity != incident.severity:
        incident.severity = severity
        changed.append("severity")
    if changed:
        incident.save(update_fields=changed)


def incident_resolve(
    *,
    incident: Incident,
    resolution: str,
    now: datetime,
    closing: dict[str, Any] | None = None,
) -> None:
    """Close it; ``closing`` are the figures seen as it resolved (``closing_facts``), which
    the resolved notification states: the value back under budget, not the last one over."""
    incident.resolved_at = now
    incident.resolution = resolution
    fields = ["resolved_at", "resolution"]
    if closing:
        incident.facts = {**incident.facts, **closing}
        fields.append("facts")
    incident.save(update_fields=fields)


def incidents_close_for_rule(*, rule: AlertRule, now: datetime) -> int:
    """Close the rule's open incidents without notifying: it watches something else now."""
    closed = Incident.objects.filter(rule=rule, resolved_at__isnull=True).update(
        resolved_at=now, resolution=Resolution.RULE_CHANGED
    )
    AlertState.objects.filter(rule=rule).update(
        status=AlertStatus.OK, incident=None, condition_since=None, changed_at=now
    )
    return closed
