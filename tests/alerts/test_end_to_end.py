"""Against the running stack: traffic over budget fires the rule, recovery resolves it.

A web server, a real Celery worker with its scheduler, PostgreSQL and the broker; the
traces come through the official OpenTelemetry exporter; the webhook goes to a real
HTTP receiver and is verified with the ``standardwebhooks`` library; the e-mail goes to
a real SMTP server (aiosmtpd).
"""

import json
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, set_span_in_context
from pytest_django import Settings
from standardwebhooks.webhooks import Webhook

from apps.alerts.models import Incident, Notification, NotificationStatus, Resolution
from tests.alerts.receivers import HttpReceiver, SmtpReceiver
from tests.builders.alerts import email_channel, rule, webhook_channel
from tests.builders.configuration import make_pipeline, make_rule, make_stage, verify_email
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import ingest_token
from tests.processes import celery_worker, wait_for
from tests.timing import MS, S

# The slow requests are sent as having ended this long ago: inside the 60 s window, so
# they fire the rule at once (within seconds), and out of it 20 to 30 s after they are
# sent rather than 50 to 60 s, which is when the recovery comes.
SLOW_AGO_S = 30


def requests(provider: TracerProvider, count: int, retrieval_ms: int, ago_s: int = 0) -> None:
    tracer = provider.get_tracer("chat-api")
    for _ in range(count):
        t0 = time.time_ns() - ago_s * S - (retrieval_ms + 50) * MS
        root = tracer.start_span("POST /chat", kind=SpanKind.SERVER, start_time=t0)
        search = tracer.start_span(
            "vector.search", context=set_span_in_context(root), start_time=t0 + 10 * MS
        )
        search.end(end_time=t0 + (10 + retrieval_ms) * MS)
        root.end(end_time=t0 + (retrieval_ms + 50) * MS)


def events(received: list[Any]) -> list[str]:
    return [json.loads(r.body)["type"] for r in received]


@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_stage_over_budget_fires_once_by_webhook_and_email_and_resolves_once(
    live_server: Any, world: TeamWorld, tmp_path: Path, settings: Settings
) -> None:
    # The receiver is on loopback: allowed here, where the channel is saved, and in the
    # worker's environment, where it is sent.
    settings.WEBHOOK_ALLOW_PRIVATE_IPS = True
    pipeline = make_pipeline(
        world.team, "rag-chat", match_root_span="POST /chat",
        evaluation_window_s=60, min_samples=5, close_after=1,
    )  # fmt: skip
    make_rule(make_stage(pipeline, "retrieval", budget_ms=350), span_name="vector.search*")
    provider = TracerProvider(resource=Resource({"service.name": "chat-api"}))
    exporter = OTLPSpanExporter(
        endpoint=live_server.url + "/v1/traces",
        headers={"Authorization": f"Bearer {ingest_token(world.team)}"},
    )
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    log = tmp_path / "worker.log"
    script, inbox = HttpReceiver().start(), SmtpReceiver().start()
    env = {"WEBHOOK_ALLOW_PRIVATE_IPS": "true", "EMAIL_URL": f"smtp://127.0.0.1:{inbox.port}"}

    with celery_worker(log, beat=True, env=env):
        hook = webhook_channel(world.team, url=script.url())
        # A verified member's address receives at once, without a confirmation e-mail.
        mailbox = email_channel(world.team, email_to=[verify_email(world.owner).email])
        rule(pipeline, [hook, mailbox], scope="any_stage")
        # The slow requests stay in the window for SLOW_AGO_S less than a whole one: the
        # worker's start-up is not to use up that time.
        started = wait_for(lambda: " ready." in log.read_text(), timeout=90, interval=0.2)
        assert started, log.read_text()[-4000:]
        requests(provider, 10, retrieval_ms=100)
        requests(provider, 20, retrieval_ms=600, ago_s=SLOW_AGO_S)
        assert provider.force_flush(timeout_millis=10_000)
        fired = wait_for(lambda: len(script.requests) >= 1, timeout=90, interval=0.5)
        assert fired, f"no webhook; the worker's log:\n{log.read_text()[-4000:]}"
        # Recovery: fast traffic until the slow traces have left the 60 s window.
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and not (
            len(script.requests) >= 2 and len(inbox.messages) >= 2
        ):
            requests(provider, 4, retrieval_ms=100)
            provider.force_flush(timeout_millis=5_000)
            time.sleep(1)
        # Anything sent twice would arrive within a few more seconds.
        time.sleep(6)
    provider.shutdown()
    script.stop()
    inbox.stop()

    assert events(script.requests) == ["alert.firing", "alert.resolved"], log.read_text()[-4000:]
    verifier = Webhook(hook.secret)
    firing, resolved = (verifier.verify(r.body, r.headers) for r in script.requests)
    assert firing["stage"]["slug"] == "retrieval"
    assert firing["percentile"] == "p95"
    assert firing["observed_ms"] > 350
    assert firing["budget_ms"] == 350
    assert firing["top_stages"][0]["slug"] == "retrieval"
    assert len(firing["example_trace_ids"]) >= 1
    assert resolved["incident"]["id"] == firing["incident"]["id"]
    # It resolved on a figure back under the budget, and says so.
    assert resolved["observed_ms"] <= 350
    assert resolved["summary"].endswith(", back under its 350 ms budget")
    assert resolved["summary"].startswith("rag-chat · stage retrieval p95 ")
    subjects = [m.subject for m in inbox.messages]
    assert len(subjects) == 2
    assert subjects[0].startswith("[WARNING] rag-chat · stage retrieval p95")
    assert subjects[1].startswith("[RESOLVED] rag-chat · stage retrieval p95 ")
    assert ", back under its 350 ms budget" in subjects[1]
    assert all(m.rcpt_tos == [world.owner.email] for m in inbox.messages)
    incident = Incident.objects.get()
    assert incident.resolution == Resolution.RECOVERED
    assert set(Notification.objects.values_list("status", flat=True)) == {
        NotificationStatus.DELIVERED
    }
    assert Notification.objects.count() == 4
