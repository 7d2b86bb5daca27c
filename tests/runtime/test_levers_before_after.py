"""The loop closed, through the real stack: the demo's traffic with a slow first token,
served through the client once without its levers and once with them, sent with the
SDK's OTLP exporter to a live server, analysed and rolled up. The share of requests
within the deadline rises, the server's ledger counts exactly the decisions the client
made by its own count, and a degradation alert fires once."""

import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.alerts.models import Incident, Notification
from apps.alerts.services.evaluation import alerts_evaluate
from apps.analysis.models import Degradation, DegradationAction
from apps.ingest.models import Trace
from tests.alerts.degradations import degradation_rule
from tests.builders.alerts import confirmed, email_channel
from tests.demo.test_client_traffic import LATE_FIRST_TOKENS, Demo
from tests.sdk_sender import workers_settle

ACTIONS = {action.value: action.label for action in DegradationAction}


@pytest.fixture
def demo(live_server: Any, transactional_db: None, clean_cache: None, settings: Any) -> Demo:
    settings.RUNTIME_DOCUMENT_CACHE_SECONDS = 0
    return Demo(live_server.url)


def server_share(demo: Demo, low: int, high: int) -> tuple[int, float]:
    """Requests the server analysed that started in ``[low, high)`` (ns), and the share of
    them within the pipeline's deadline."""
    deadline_ms = demo.pipeline.deadline_ms
    assert deadline_ms is not None
    traces = Trace.objects.filter(pipeline=demo.pipeline, start_ns__gte=low, start_ns__lt=high)
    durations = [
        end - start
        for start, end in traces.values_list("start_ns", "end_ns")
        if start is not None and end is not None
    ]
    deadline_ns = deadline_ms * 1_000_000
    within = sum(duration <= deadline_ns for duration in durations)
    return len(durations), within / len(durations)


@pytest.mark.slow
def test_the_levers_bring_requests_within_budget_and_the_ledger_counts_each_decision(
    demo: Demo, capsys: pytest.CaptureFixture[str]
) -> None:
    stage_ids = dict(demo.pipeline.stages.values_list("slug", "id"))
    channel = confirmed(email_channel(demo.team), "oncall@acme.example.com")
    degradation_rule(
        demo.pipeline, [channel], percent="20", minutes=0, stage=demo.pipeline.stages.get(
            slug="ttft"
        ),
    )  # fmt: skip

    started = time.time_ns()
    without = demo.run(slow=LATE_FIRST_TOKENS, levers=False)
    between = time.time_ns()
    with_levers = demo.run(slow=LATE_FIRST_TOKENS)
    ended = time.time_ns()
    workers_settle()

    served_without, share_without = server_share(demo, started, between)
    served_with, share_with = server_share(demo, between, ended)
    assert served_without == without.requests
    assert served_with == with_levers.requests
    with capsys.disabled():
        print(
            f"\nwithin the {demo.pipeline.deadline_ms} ms deadline: {share_without:.1%} of "
            f"{served_without} requests without the levers, {share_with:.1%} of "
            f"{served_with} with them"
        )
    assert share_with >= share_without + 0.2
    # The client's measure and the server's agree on each run.
    assert without.within_share == pytest.approx(share_without, abs=0.05)
    assert with_levers.within_share == pytest.approx(share_with, abs=0.05)

    slug_of = {pk: slug for slug, pk in stage_ids.items()}
    rows = Degradation.objects.filter(pipeline_id=demo.pipeline.pk)
    ledger = Counter(
        (slug_of[stage_id], ACTIONS[action])
        for stage_id, action in rows.values_list("stage_id", "action")
    )
    assert without.decisions == {}
    assert dict(ledger) == with_levers.decisions
    assert with_levers.decision_count(action="fallback", stage="ttft") > 0
    assert not Degradation.objects.filter(start_ns__lt=between).exists()

    now = timezone.now()
    alerts_evaluate(now=now)
    alerts_evaluate(now=now + timedelta(seconds=10))
    (incident,) = Incident.objects.filter(pipeline=demo.pipeline)
    assert incident.is_open
    assert incident.facts["degradation"]["rate_percent"] >= 20
    firing = Notification.objects.filter(incident=incident, event="firing")
    assert firing.count() == 1
