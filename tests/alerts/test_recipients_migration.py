"""Addresses already on e-mail channels when confirmations came in are asked like new
ones: until they confirm, they receive nothing else."""

import pytest
from django.core import mail
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from apps.alerts.models import Channel, ChannelKind, ChannelRecipient, RecipientState
from apps.alerts.services.recipients import recipient_confirmations_send
from tests.builders.configuration import make_team

BEFORE = [("alerts", "0001_initial")]


def _latest() -> list[tuple[str, str]]:
    """The recipients' migration and every one after it: the next tests find the schema
    as it is."""
    executor = MigrationExecutor(connection)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] == "alerts"]


def _migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.mark.django_db(transaction=True)
def test_existing_addresses_are_asked_to_confirm_by_the_sweep() -> None:
    team = make_team("acme")
    _migrate(BEFORE)
    try:
        # As the database was: a channel's addresses, nobody asked.
        Channel.objects.create(
            team=team,
            slug="team-mail",
            kind=ChannelKind.EMAIL,
            email_to=["a@example.com", "B@example.com", "b@EXAMPLE.com"],
        )
        Channel.objects.create(team=team, slug="hook", kind=ChannelKind.WEBHOOK, url="https://x.io")
    finally:
        _migrate(_latest())

    rows = list(ChannelRecipient.objects.order_by("pk"))
    assert [(r.email, r.state) for r in rows] == [
        ("a@example.com", RecipientState.WAITING),
        ("B@example.com", RecipientState.WAITING),
    ]
    assert all(r.confirmation_due_at is not None for r in rows)

    assert recipient_confirmations_send(now=timezone.now(), grace_s=0) == 2
    assert sorted(m.to[0] for m in mail.outbox) == ["B@example.com", "a@example.com"]
