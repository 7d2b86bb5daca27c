"""Ingestion's caps are an account's, however many teams it creates: rate and backlog."""

from types import SimpleNamespace

import pytest

from apps.ingest import ratelimit
from apps.ingest.models import Encoding
from apps.ingest.services import intake
from apps.ingest.services.batches import raw_batch_store
from apps.teams.models import Team
from tests.builders.configuration import make_team, make_user
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import ingest_token, post, protobuf_batch, rate_window_fresh

OTLP = "/v1/traces"
NOW = 1_000_002.0  # two seconds into a five-second window

pytestmark = pytest.mark.usefixtures("clean_cache")


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (ratelimit, intake):
        monkeypatch.setattr(module, "time", SimpleNamespace(time=lambda: NOW))


def _teams_of_one_account(world: TeamWorld) -> list[Team]:
    """The owner's team and nine more of theirs: ten teams, one account."""
    return [world.team] + [make_team(f"acme-{i}", owner=world.owner) for i in range(2, 11)]


def _teams_of_ten_accounts() -> list[Team]:
    return [make_team(f"solo-{i}", owner=make_user(f"solo{i}")) for i in range(1, 11)]


def _backlog(team: Team, spans: int) -> None:
    raw_batch_store(
        team=team, token=None, encoding=Encoding.OTLP_PROTOBUF,
        body=protobuf_batch(spans), span_count=spans,
    )  # fmt: skip


def _statuses(teams: list[Team]) -> list[int]:
    return [post(OTLP, protobuf_batch(5), token=ingest_token(team)).status_code for team in teams]


def test_ten_teams_of_one_account_share_its_span_rate(
    world: TeamWorld, settings, frozen_clock
) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 9  # 45 spans a window: nine batches of five
    rate_window_fresh()

    assert _statuses(_teams_of_one_account(world)) == [200] * 9 + [429]


def test_ten_accounts_of_one_team_each_have_a_span_rate_of_their_own(
    db: None, settings, frozen_clock
) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 9
    rate_window_fresh()

    assert _statuses(_teams_of_ten_accounts()) == [200] * 10


def test_the_rate_limits_message_names_the_account(world: TeamWorld, settings, frozen_clock):
    settings.INGEST_RATE_LIMIT_SPANS = 1
    rate_window_fresh()
    token = ingest_token(world.team)
    post(OTLP, protobuf_batch(5), token=token)

    response = post(OTLP, protobuf_batch(5), token=token)

    assert response.status_code == 429
    assert b"this account is over its limit of 1 spans per second" in response.content


def test_ten_teams_of_one_account_share_its_backlog(world: TeamWorld, settings) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 8
    *nine, tenth = _teams_of_one_account(world)
    for team in nine:
        _backlog(team, 1)

    response = post(OTLP, protobuf_batch(), token=ingest_token(tenth))

    assert response.status_code == 503
    assert b"too many of this account's spans are waiting" in response.content


def test_ten_accounts_with_a_backlog_each_are_not_refused(db: None, settings) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 8
    *nine, tenth = _teams_of_ten_accounts()
    for team in nine:
        _backlog(team, 1)

    assert post(OTLP, protobuf_batch(), token=ingest_token(tenth)).status_code == 200


def test_an_account_with_many_teams_cannot_push_another_over_its_even_share(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 0
    settings.INGEST_MAX_BACKLOG_SPANS = 10  # two accounts with a backlog: five spans each
    many = _teams_of_one_account(world)
    for team in many:
        _backlog(team, 2)
    _backlog(world.other_team, 3)

    heavy = post(OTLP, protobuf_batch(), token=ingest_token(many[0]))
    light = post(OTLP, protobuf_batch(), token=ingest_token(world.other_team))

    # Counted per team, eleven teams would share it: nobody's even share would be a span.
    assert (heavy.status_code, light.status_code) == (503, 200)
