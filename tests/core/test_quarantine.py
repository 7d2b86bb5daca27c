"""What operators see of quarantined items: /readyz for staff, the admin, the command."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from apps.core.models import QuarantinedItem, QuarantineKind
from apps.core.quarantine import quarantine_record
from tests.builders.configuration import make_user
from tests.conftest import TeamWorld, client_for


@pytest.fixture
def held(world: TeamWorld) -> None:
    quarantine_record(
        kind=QuarantineKind.TRACE, item_id=41, team_id=world.other_team.pk,
        reason="OverflowError: cannot convert float infinity to integer",
    )  # fmt: skip
    quarantine_record(
        kind=QuarantineKind.RAW_BATCH, item_id=7, team_id=world.other_team.pk, reason="bad rows"
    )


def staff_client() -> Client:
    return client_for(make_user("ops", is_staff=True, is_superuser=True))


@pytest.mark.usefixtures("held")
def test_readyz_shows_staff_the_held_items_per_kind_and_the_latest_reasons() -> None:
    body = staff_client().get("/readyz").json()

    assert body["status"] == "ok"  # quarantined items never make the service unready
    assert body["quarantine"]["held"] == {
        "raw_batch": 1, "trace": 1, "rollup_bucket": 0, "evaluation": 0,
    }  # fmt: skip
    reasons = {item["kind"]: item["reason"] for item in body["quarantine"]["latest"]}
    assert reasons["trace"].startswith("OverflowError")


@pytest.mark.usefixtures("held")
def test_readyz_shows_members_and_anonymous_callers_no_quarantine_detail(
    world: TeamWorld,
) -> None:
    assert "quarantine" not in Client().get("/readyz").json()
    assert "quarantine" not in client_for(world.owner).get("/readyz").json()


@pytest.mark.usefixtures("held")
def test_the_admin_lists_quarantined_items_with_their_reason() -> None:
    response = staff_client().get("/admin/core/quarantineditem/")

    assert response.status_code == 200
    assert b"cannot convert float infinity to integer" in response.content


@pytest.mark.usefixtures("held")
def test_the_admin_is_closed_to_team_owners(world: TeamWorld) -> None:
    response = client_for(world.owner).get("/admin/core/quarantineditem/")
    assert response.status_code == 302  # to the admin sign-in


@pytest.mark.usefixtures("held")
def test_the_command_lists_held_items_and_refuses_a_retry_that_names_nothing() -> None:
    out = StringIO()
    call_command("quarantine", stdout=out)
    assert "trace" in out.getvalue()
    assert "bad rows" in out.getvalue()

    with pytest.raises(CommandError, match="--all"):
        call_command("quarantine", "retry")


@pytest.mark.usefixtures("held")
def test_recording_an_item_again_counts_it_and_holds_it_again() -> None:
    call_command("quarantine", "retry", "--all", stdout=StringIO())
    quarantine_record(kind=QuarantineKind.RAW_BATCH, item_id=7, team_id=None, reason="again")

    item = QuarantinedItem.objects.get(kind=QuarantineKind.RAW_BATCH, item_id=7)
    assert (item.times, item.released_at, item.reason) == (2, None, "again")
