"""Across the queue: a real Celery worker mails the confirmation once the channel is
committed, and a test send reaches the address only after it confirmed by a POST."""

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from apps.alerts.models import ChannelRecipient, RecipientState
from apps.alerts.services.notifications import notification_test_send
from tests.alerts.receivers import SmtpReceiver
from tests.builders.alerts import email_channel
from tests.conftest import TeamWorld
from tests.processes import celery_worker, wait_for

ASKED = "asked@elsewhere.example.com"
OTHER = "other@elsewhere.example.com"
LINK = re.compile(r"(https?://\S+/alerts/recipients/[^/\s]+/)")


@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_worker_asks_first_and_sends_the_test_only_once_confirmed(
    world: TeamWorld, tmp_path: Path
) -> None:
    inbox = SmtpReceiver().start()
    log = tmp_path / "worker.log"
    env = {"EMAIL_URL": f"smtp://127.0.0.1:{inbox.port}"}
    try:
        with celery_worker(log, queues="alerts", env=env):
            channel = email_channel(world.team, email_to=[ASKED, OTHER])
            asked = wait_for(lambda: len(inbox.messages) >= 2, timeout=60)
            assert asked, f"no confirmation; the worker's log:\n{log.read_text()[-3000:]}"
            (confirmation,) = [m for m in inbox.messages if m.rcpt_tos == [ASKED]]
            (link,) = LINK.findall(confirmation.part("text/plain"))
            Client().post(urlsplit(link).path, {"answer": "confirm"})

            notification_test_send(channel=channel, now=timezone.now())
            arrived = wait_for(lambda: len(inbox.messages) >= 3, timeout=60)
            assert arrived, f"no test; the worker's log:\n{log.read_text()[-3000:]}"
    finally:
        inbox.stop()

    assert [m.rcpt_tos for m in inbox.messages[2:]] == [[ASKED]]
    assert inbox.messages[2].subject.startswith("[TEST]")
    assert ChannelRecipient.objects.get(email=OTHER).state == RecipientState.WAITING
    assert ChannelRecipient.objects.get(email=ASKED).confirmation_sent_at is not None
