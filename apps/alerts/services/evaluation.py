"""Alert evaluation: each rule's scopes move ok → pending → firing → resolved, persisted.

One rule is evaluated at a time under its row lock, from the states it left, so an
evaluation run twice (the beat and a prompt run, or a task delivered twice) finds
the transition done and writes nothing more: each transition writes its
notifications once, under keys unique per incident, event, reminder and channel.

A rule silenced (``silenced_until`` in the future) still moves through its states
and keeps its incidents, but tells nobody; an incident that fired silenced is
announced once the silence ends if it still fires, and its resolution is told only
if its firing was.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from django.db import transaction
from django.utils import timezone

from apps.alerts.models import (
    AlertRule,
    AlertState,
    AlertStatus,
    Incident,
    NoDataPolicy,
    NotificationEvent,
    Resolution,
)
from apps.alerts.selectors.observations import Observation, closing_facts, rule_observations
from apps.alerts.services.incidents import incident_follow, incident_open, incident_resolve
from apps.alerts.services.notifications import notifications_write
from apps.core.isolated_pass import item_alone
from apps.core.isolation import failure_reason, pass_statement_timeout

logger = logging.getLogger(__name__)


@dataclass
class AlertsResult:
    rules: int = 0
    skipped: int = 0
    fired: int = 0
    resolved: int = 0
    notifications: int = 0
    failed: int = 0

    def add(self, other: "AlertsResult") -> None:
        for name in ("rules", "skipped", "fired", "resolved", "notifications", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class _Step:
    """One rule's evaluation: its states, what it writes and tells."""

    def __init__(self, rule: AlertRule, now: datetime) -> None:
        self.rule = rule
        self.now = now
        self.result = AlertsResult(rules=1)
        self.silenced = rule.silenced_until is not None and rule.silenced_until > now

    def notify(self, incident: Incident, event: str) -> None:
        if self.silenced:
            return
        if event in (NotificationEvent.FIRING, NotificationEvent.REMINDER):
            incident.announced = True
            incident.notified_at = self.now
            incident.save(update_fields=["announced", "notified_at", "reminders"])
        written = notifications_write(rule=self.rule, incident=incident, event=event, now=self.now)
        self.result.notifications += len(written)

    def fire(self, state: AlertState, observation: Observation) -> None:
        incident = incident_open(
            rule=self.rule,
            scope_key=state.scope_key,
            stage=observation.stage,
            severity=observation.severity or self.rule.severity,
            facts=observation.facts,
            now=self.now,
        )
        state.status, state.incident, state.changed_at = AlertStatus.FIRING, incident, self.now
        self.result.fired += 1
        self.notify(incident, NotificationEvent.FIRING)

    def resolve(
        self, state: AlertState, resolution: str, observation: Observation | None = None
    ) -> None:
        incident = state.incident
        state.status, state.incident, state.condition_since = AlertStatus.OK, None, None
        state.changed_at = self.now
        if incident is None:
            return
        closing = (
            closing_facts(facts=incident.facts, observation=observation)
            if resolution == Resolution.RECOVERED
            else None
        )
        incident_resolve(incident=incident, resolution=resolution, now=self.now, closing=closing)
        self.result.resolved += 1
        if self.rule.notify_on_resolve and incident.announced:
            self.notify(incident, NotificationEvent.RESOLVED)

    def keep_firing(self, state: AlertState, observation: Observation) -> None:
        incident = state.incident
        if incident is None:  # its incident was closed under it: start again
            state.status, state.condition_since = AlertStatus.OK, None
            return
        incident_follow(incident=incident, facts=observation.facts, severity=observation.severity)
        if incident.no_data_at is not None:
            incident.no_data_at = None
            incident.save(update_fields=["no_data_at"])
        if not incident.announced:
            self.notify(incident, NotificationEvent.FIRING)
            return
        every = self.rule.renotify_minutes
        if (
            every
            and incident.notified_at
            and self.now - incident.notified_at >= timedelta(minutes=every)
        ):
            if not self.silenced:
                incident.reminders += 1
            self.notify(incident, NotificationEvent.REMINDER)

    def no_data(self, state: AlertState) -> None:
        if state.status == AlertStatus.PENDING:
            state.status, state.condition_since, state.changed_at = AlertStatus.OK, None, self.now
            return
        if state.status != AlertStatus.FIRING:
            return
        policy = self.rule.no_data
        if policy == NoDataPolicy.RESOLVE:
            self.resolve(state, Resolution.NO_DATA)
        elif (
            policy == NoDataPolicy.NOTIFY
            and state.incident is not None
            and state.incident.no_data_at is None
        ):
            state.incident.no_data_at = self.now
            state.incident.save(update_fields=["no_data_at"])
            if state.incident.announced:
                self.notify(state.incident, NotificationEvent.NO_DATA)

    def advance(self, state: AlertState, observation: Observation | None) -> None:
        """The one transition of ``state`` that ``observation`` calls for."""
        if observation is not None and observation.holds is None:
            self.no_data(state)
            return
        if observation is not None and not observation.judged:
            return  # no verdict on this window: the state stays where it is
        if observation is None or not observation.holds:
            if state.status == AlertStatus.FIRING:
                self.resolve(state, Resolution.RECOVERED, observation)
            elif state.status == AlertStatus.PENDING:
                state.status, state.condition_since = AlertStatus.OK, None
                state.changed_at = self.now
            return
        if state.status == AlertStatus.FIRING:
            self.keep_firing(state, observation)
            return
        if state.status == AlertStatus.OK:
            state.status, state.changed_at = AlertStatus.PENDING, self.now
            state.condition_since = observation.since or self.now
        since = state.condition_since or self.now
        if self.now - since >= timedelta(minutes=self.rule.violation_for_minutes):
            self.fire(state, observation)


def _evaluate_rule(rule: AlertRule, now: datetime) -> AlertsResult:
    """Evaluate one rule; the caller holds its row lock inside a transaction."""
    pass_statement_timeout()
    observations = rule_observations(rule, now)
    states = {
        state.scope_key: state
        for state in AlertState.objects.filter(rule=rule).select_related(
            "incident__team", "incident__pipeline", "incident__stage"
        )
    }
    step = _Step(rule, now)
    for key in sorted(set(observations) | set(states)):
        state = states.get(key)
        observation = observations.get(key)
        if state is None:
            if observation is None or not observation.holds:
                continue
            state = AlertState(rule=rule, scope_key=key, changed_at=now, evaluated_at=now)
        before = (state.status, state.condition_since, state.incident_id)
        step.advance(state, observation)
        state.evaluated_at = now
        if state.pk is None or before != (state.status, state.condition_since, state.incident_id):
            state.save()
    return step.result


def _locked(rule_id: int) -> AlertRule | None:
    """The rule, locked; None when another evaluation holds it (it does this work now)."""
    return (
        AlertRule.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("team", "pipeline", "stage")
        .filter(pk=rule_id, enabled=True)
        .first()
    )


def alert_rule_evaluate(*, rule_id: int, now: datetime) -> AlertsResult:
    with transaction.atomic():
        rule = _locked(rule_id)
        if rule is None:
            return AlertsResult(skipped=1)
        return _evaluate_rule(rule, now)


def alerts_evaluate(
    *, now: datetime | None = None, pipeline_ids: Iterable[int] | None = None
) -> AlertsResult:
    """Evaluate every enabled rule (of ``pipeline_ids`` only, if given) once at ``now``.

    One rule's failure is logged and the pass goes on with the others; a transient
    database error ends the pass, for the next one to retry.
    """
    now = now or timezone.now()
    rules = AlertRule.objects.filter(enabled=True)
    if pipeline_ids is not None:
        rules = rules.filter(pipeline_id__in=list(pipeline_ids))
    result = AlertsResult()
    for rule_id, team_id in rules.order_by("pk").values_list("pk", "team_id"):
        evaluate = partial(alert_rule_evaluate, rule_id=rule_id, now=now)
        result.add(item_alone(evaluate, on_failure=partial(_not_evaluated, rule_id, team_id)))
    return result


def _not_evaluated(rule_id: int, team_id: int, exc: BaseException) -> AlertsResult:
    logger.warning(
        "alert rule %s of team %s not evaluated: %s", rule_id, team_id, failure_reason(exc)
    )
    return AlertsResult(failed=1)
