"""Degradation rules: the share of requests a run-time client degraded, over N % for M
minutes, moves ok → pending → firing → resolved, one notification per transition.

The requests are rollup buckets of the pipeline's end-to-end time and the decisions
ledger rows, both written by hand at known times; each evaluation is given its ``now``.
The pipeline judges windows of 300 s with at least 20 requests.
"""

from datetime import timedelta

import pytest

from apps.alerts.models import (
    AlertState,
    AlertStatus,
    Incident,
    Notification,
    Resolution,
    RuleScope,
)
from apps.alerts.selectors.observations import rule_observations
from apps.alerts.services.evaluation import alerts_evaluate
from apps.pipelines.models import Pipeline, Stage
from tests.alerts.degradations import decisions, degradation_rule, traffic
from tests.builders.alerts import NOW, email_channel, webhook_channel
from tests.builders.configuration import make_pipeline, make_stage
from tests.builders.evaluation_rollups import hex_id
from tests.conftest import TeamWorld

MINUTE = timedelta(minutes=1)


@pytest.fixture
def rag(world: TeamWorld) -> tuple[Pipeline, Stage, Stage]:
    pipeline = make_pipeline(world.team, "rag-chat", evaluation_window_s=300, min_samples=20)
    return (
        pipeline,
        make_stage(pipeline, "rerank", budget_ms=150),
        make_stage(pipeline, "generation", budget_ms=1200),
    )


def events() -> list[tuple[str, str]]:
    return sorted(Notification.objects.values_list("event", "channel__slug"))


def state() -> AlertState:
    return AlertState.objects.get()


def test_a_fallback_storm_fires_once_after_its_minutes_then_resolves_when_the_rate_falls(
    world: TeamWorld, rag: tuple[Pipeline, Stage, Stage]
) -> None:
    pipeline, rerank, _ = rag
    channels = [email_channel(world.team), webhook_channel(world.team)]
    degradation_rule(pipeline, channels, stage=rerank)
    # 40 % of 50 requests degraded at rerank a minute before NOW: in every window to NOW+4m.
    slowest = traffic(
        pipeline,
        NOW - MINUTE,
        requests=50,
        degraded={rerank: {"fallback": 18, "skip": 2}},
        examples=3,
    )

    alerts_evaluate(now=NOW)
    assert (state().status, state().condition_since) == (AlertStatus.PENDING, NOW)
    alerts_evaluate(now=NOW + MINUTE)
    assert state().status == AlertStatus.PENDING
    assert not Notification.objects.exists()

    fired = alerts_evaluate(now=NOW + 2 * MINUTE)
    again = alerts_evaluate(now=NOW + 2 * MINUTE)
    later = alerts_evaluate(now=NOW + 3 * MINUTE)

    assert (fired.fired, again.fired, later.fired) == (1, 0, 0)
    assert (again.notifications, later.notifications) == (0, 0)
    assert events() == [("firing", "oncall-hook"), ("firing", "team-mail")]
    incident = Incident.objects.get()
    assert incident.scope_key == f"stage:{rerank.pk}"
    assert incident.stage == rerank
    assert incident.facts["window_s"] == 300
    assert incident.facts["degradation"] == {
        "rate_percent": 40.0,
        "peak_rate_percent": 40.0,
        "threshold_percent": 20.0,
        "degraded": 20,
        "requests": 50,
        "by_action": {"fallback": 18, "skip": 2},
        "by_stage": {},
    }
    assert incident.facts["example_trace_ids"] == [hex_id(t) for t in slowest]
    payload = Notification.objects.filter(channel__slug="oncall-hook").get().payload
    assert payload["summary"] == (
        "rag-chat · stage rerank degraded on 40.0 % of 50 requests over 5 min "
        "(threshold 20 %): 18 fallback, 2 skip"
    )

    # Healthy traffic: 20 of 250 requests is 8 %, under the threshold.
    traffic(pipeline, NOW + 3 * MINUTE + timedelta(seconds=30), requests=200)
    resolved = alerts_evaluate(now=NOW + 4 * MINUTE)

    assert resolved.resolved == 1
    incident.refresh_from_db()
    assert incident.resolution == Resolution.RECOVERED
    assert incident.facts["degradation"]["rate_percent"] == 8.0
    assert incident.facts["degradation"]["peak_rate_percent"] == 40.0
    assert state().status == AlertStatus.OK
    assert events() == [
        ("firing", "oncall-hook"),
        ("firing", "team-mail"),
        ("resolved", "oncall-hook"),
        ("resolved", "team-mail"),
    ]
    closing = Notification.objects.get(channel__slug="oncall-hook", event="resolved").payload
    assert closing["summary"] == (
        "rag-chat · stage rerank degraded on 8.0 % of 250 requests over 5 min, back under "
        "its 20 % threshold"
    )


def test_a_rate_under_the_threshold_tells_nobody(
    world: TeamWorld, rag: tuple[Pipeline, Stage, Stage]
) -> None:
    pipeline, rerank, _ = rag
    degradation_rule(pipeline, [email_channel(world.team)], stage=rerank, minutes=0)
    # 9 of 50 is 18 %; the threshold is 20 %: 10 of 50 would hold.
    traffic(pipeline, NOW - MINUTE, requests=50, degraded={rerank: {"cap": 9}})

    alerts_evaluate(now=NOW)
    assert not AlertState.objects.exists()

    decisions(pipeline, rerank, NOW - MINUTE, {"timeout": 1})
    assert alerts_evaluate(now=NOW + timedelta(seconds=10)).fired == 1


def test_too_few_requests_give_no_verdict_and_keep_the_state(
    world: TeamWorld, rag: tuple[Pipeline, Stage, Stage]
) -> None:
    pipeline, rerank, _ = rag
    degradation_rule(pipeline, [email_channel(world.team)], stage=rerank, minutes=0)
    # Every one of 10 requests degraded, but 10 are under the pipeline's 20 samples.
    traffic(pipeline, NOW - MINUTE, requests=10, degraded={rerank: {"fallback": 10}})
    alerts_evaluate(now=NOW)
    assert not AlertState.objects.exists()

    traffic(pipeline, NOW - MINUTE, requests=40, degraded={rerank: {"fallback": 20}})
    alerts_evaluate(now=NOW)
    assert state().status == AlertStatus.FIRING
    # Five minutes on, the window is empty, but requests came within "no data after" (three
    # windows): no verdict, and the alert stays as it was.
    quiet = alerts_evaluate(now=NOW + 5 * MINUTE)
    assert (quiet.resolved, quiet.notifications, state().status) == (0, 0, AlertStatus.FIRING)


def test_no_request_at_all_is_no_data_and_resolves_for_lack_of_it(
    world: TeamWorld, rag: tuple[Pipeline, Stage, Stage]
) -> None:
    pipeline, rerank, _ = rag
    rule = degradation_rule(pipeline, [webhook_channel(world.team)], stage=rerank, minutes=0)

    (observation,) = rule_observations(rule, NOW).values()
    assert observation.holds is None
    alerts_evaluate(now=NOW)
    assert not AlertState.objects.exists()

    traffic(pipeline, NOW - MINUTE, requests=50, degraded={rerank: {"skip": 30}})
    alerts_evaluate(now=NOW)
    # Three windows (15 min) without a request: the scope has no data.
    silent = alerts_evaluate(now=NOW + 15 * MINUTE)

    assert silent.resolved == 1
    incident = Incident.objects.get()
    assert incident.resolution == Resolution.NO_DATA
    payload = Notification.objects.get(event="resolved").payload
    assert payload["summary"] == (
        "rag-chat · stage rerank too few requests to judge its 20 % degradation threshold, "
        "resolved for lack of data"
    )


def test_any_stage_keeps_one_incident_per_stage_over_the_threshold(
    world: TeamWorld, rag: tuple[Pipeline, Stage, Stage]
) -> None:
    pipeline, rerank, generation = rag
    degradation_rule(pipeline, [webhook_channel(world.team)], scope=RuleScope.ANY_STAGE, minutes=0)
    traffic(
        pipeline,
        NOW - MINUTE,
        requests=100,
        degraded={rerank: {"fallback": 30}, generation: {"hedge": 5}},
    )

    alerts_evaluate(now=NOW)

    (incident,) = Incident.objects.all()
    assert (incident.scope_key, incident.stage) == (f"stage:{rerank.pk}", rerank)
    decisions(pipeline, generation, NOW, {"hedge": 20})
    alerts_evaluate(now=NOW + timedelta(seconds=10))
    assert sorted(Incident.objects.values_list("scope_key", flat=True)) == sorted(
        [f"stage:{rerank.pk}", f"stage:{generation.pk}"]
    )


def test_end_to_end_counts_each_degraded_request_once_whatever_its_stages(
    world: TeamWorld, rag: tuple[Pipeline, Stage, Stage]
) -> None:
    pipeline, rerank, generation = rag
    degradation_rule(pipeline, [webhook_channel(world.team)], percent="12.5", minutes=0)
    traffic(pipeline, NOW - MINUTE, requests=80)
    # Ten requests degraded at rerank, five of them also at generation: 10 of 80 requests.
    decisions(pipeline, rerank, NOW - MINUTE, {"skip": 10}, traces=list(range(1, 11)))
    decisions(pipeline, generation, NOW - MINUTE, {"fallback": 5}, traces=list(range(1, 6)))

    alerts_evaluate(now=NOW)

    incident = Incident.objects.get()
    assert (incident.scope_key, incident.stage) == ("e2e", None)
    assert incident.facts["degradation"] | {"by_action": None} == {
        "rate_percent": 12.5,
        "peak_rate_percent": 12.5,
        "threshold_percent": 12.5,
        "degraded": 10,
        "requests": 80,
        "by_action": None,
        "by_stage": {"rerank": 10, "generation": 5},
    }
    assert incident.facts["degradation"]["by_action"] == {"skip": 10, "fallback": 5}
    payload = Notification.objects.get().payload
    assert payload["summary"] == (
        "rag-chat · end to end degraded on 12.5 % of 80 requests over 5 min "
        "(threshold 12.5 %): 10 skip, 5 fallback"
    )
