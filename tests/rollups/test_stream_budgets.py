"""Budgets on a stage's streamed answers: validated in one place, set through the API and
the configuration file, evaluated like the stage's own budget, and alerted on once."""

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.alerts.models import Incident, Notification, RuleScope
from apps.alerts.services.evaluation import alerts_evaluate
from apps.core.percentiles import QUANTILES
from apps.pipelines.services import stage_update
from apps.pipelines.stream_budget import stream_budget_clean
from apps.rollups.models import Measure, Violation
from apps.rollups.services.evaluation import budgets_evaluate
from apps.rollups.sketches.ddsketch import Sketch
from tests.builders.alerts import email_channel, rule
from tests.builders.api import error_of, token_client
from tests.builders.bucket_rows import nearest_rank
from tests.builders.ingested_traces import ingest_and_roll_up
from tests.builders.streamed_traffic import streamed_traffic, streaming_pipeline
from tests.conftest import TeamWorld
from tests.timing import MS

pytestmark = pytest.mark.django_db
STAGE_URL = "/api/v1/pipelines/streamed/stages/generation/"


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (None, {}),
        ({}, {}),
        ({"max_chunk_gap": {"p99": 500}}, {"max_chunk_gap": {"p99": 500}}),
        (
            {"max_chunk_gap": {"p99": 500}, "time_per_output_token": {"p95": 40}},
            {"time_per_output_token": {"p95": 40}, "max_chunk_gap": {"p99": 500}},
        ),
    ],
)
def test_valid_budgets_are_stored_in_key_order(value: Any, stored: dict[str, Any]) -> None:
    assert stream_budget_clean(value) == stored


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "A stream budget is a mapping"),
        ({"ttft": {"p95": 1}}, "Unknown key ttft"),
        ({"max_chunk_gap": 500}, "max_chunk_gap: one percentile"),
        ({"max_chunk_gap": {"p95": 5, "p99": 9}}, "max_chunk_gap: one percentile"),
        ({"max_chunk_gap": {"p42": 5}}, "max_chunk_gap: a percentile of p50, p90, p95, p99"),
        ({"time_per_output_token": {"p95": 0}}, "whole milliseconds from 1 to 3600000"),
        ({"time_per_output_token": {"p95": 2.5}}, "whole milliseconds"),
        ({"time_per_output_token": {"p95": True}}, "whole milliseconds"),
        ({"time_per_output_token": {"p95": 10**30}}, "whole milliseconds"),
        ({"x" * 10_000: {}}, "Unknown key " + "x" * 40 + ":"),
    ],
)
def test_a_wrong_budget_is_refused_naming_its_key(value: Any, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        stream_budget_clean(value)
    assert message in raised.value.messages[0]


def test_owner_sets_it_through_the_api_and_wrong_ones_are_a_400(world: TeamWorld) -> None:
    streaming_pipeline(world.team)
    owner = token_client(world.owner)
    body = {"stream_budget": {"time_per_output_token": {"p95": 40}}}
    response = owner.patch(STAGE_URL, body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["stream_budget"] == {"time_per_output_token": {"p95": 40}}
    bad = owner.patch(STAGE_URL, {"stream_budget": {"max_chunk_gap": {"p95": -1}}}, format="json")
    assert bad.status_code == 400
    assert "stream_budget" in str(error_of(bad))
    assert owner.get(STAGE_URL).json()["stream_budget"] == {"time_per_output_token": {"p95": 40}}


def test_a_viewer_cannot_set_it_and_another_team_cannot_see_the_stage(world: TeamWorld) -> None:
    streaming_pipeline(world.team)
    body = {"stream_budget": {"max_chunk_gap": {"p99": 500}}}
    assert token_client(world.viewer).patch(STAGE_URL, body, format="json").status_code == 403
    assert token_client(world.outsider).patch(STAGE_URL, body, format="json").status_code == 404
    assert token_client(world.owner).get(STAGE_URL).json()["stream_budget"] == {}


def test_a_stall_budget_opens_one_violation_and_its_alert_fires_once(world: TeamWorld) -> None:
    pipeline = streaming_pipeline(world.team)
    generation = pipeline.stages.get(slug="generation")
    stage_update(
        stage=generation,
        stream_budget={"max_chunk_gap": {"p99": 300}, "time_per_output_token": {"p95": 1000}},
    )
    sent = streamed_traffic(200, seed=8, ago_s=(240, 20))
    ingest_and_roll_up(world.team, sent.spans)
    rule(pipeline, [email_channel(world.team)], scope=RuleScope.STAGE, stage=generation)
    now = timezone.now()

    budgets_evaluate(now=now)
    budgets_evaluate(now=now + timedelta(seconds=10))

    # Only the gap's budget is broken: the time per output token is well under its own.
    stall = Violation.objects.get()
    assert (stall.stage_id, stall.measure, stall.percentile) == (
        generation.pk,
        Measure.MAX_CHUNK_GAP,
        "p99",
    )
    exact = nearest_rank([row[4] / MS for row in sent.rows], QUANTILES["p99"])
    assert stall.observed_ms == pytest.approx(exact, rel=0.01)
    assert stall.observed_ms > 300

    first = alerts_evaluate(now=now)
    again = alerts_evaluate(now=now + timedelta(minutes=1))
    assert (first.fired, again.fired) == (1, 0)
    incident = Incident.objects.get()
    assert incident.facts["measure"] == "longest chunk gap"
    assert Notification.objects.filter(event="firing").count() == 1
    payload = Notification.objects.get().payload
    assert "stage generation longest chunk gap p99" in payload["summary"]


def test_a_sketch_counts_the_values_above_a_threshold_but_those_within_1_percent() -> None:
    values = np.random.default_rng(5).lognormal(np.log(60), 1.0, 20_000)
    sketch = Sketch.from_values(values)
    for threshold in (5.0, 60.0, 150.0, 500.0):
        surely = int((values > threshold * 1.01).sum())
        maybe = int((values > threshold * 0.99).sum())
        assert surely <= sketch.count_above(threshold) <= maybe
    assert Sketch().count_above(1.0) == 0
