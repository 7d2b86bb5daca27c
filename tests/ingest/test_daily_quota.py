"""A daily quota of stored bytes per account: 429 until midnight UTC past it."""

from types import SimpleNamespace

import pytest
from django.db import OperationalError

from apps.ingest import quota, ratelimit
from apps.ingest.decoding import RpcCode
from apps.ingest.models import Encoding, RawBatch
from apps.ingest.services import intake
from apps.ingest.services.batches import DECODERS
from apps.ingest.services.span_rows import span_rows
from apps.teams.models import Team
from tests.builders.configuration import make_team
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import (
    JSON,
    PROTOBUF,
    gzipped,
    ingest_token,
    native_batch,
    native_span,
    post,
    protobuf_batch,
    status_of,
)

OTLP = "/v1/traces"
NATIVE = "/api/v1/spans"
DAY_S = 86_400
NOW = 100 * DAY_S + 3_600.0  # 01:00 UTC
TO_MIDNIGHT = DAY_S - 3_600

pytestmark = pytest.mark.usefixtures("clean_cache")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    clock = SimpleNamespace(time=lambda: NOW)
    for module in (quota, ratelimit, intake):
        monkeypatch.setattr(module, "time", clock)
    return clock


def _stored_size(body: bytes, team: Team, encoding: Encoding = Encoding.OTLP_PROTOBUF) -> int:
    """What a batch of this body adds to the day: its spans' rows as stored."""
    return len(span_rows(team.pk, DECODERS[encoding](body).spans))


def _body(spans: int = 3) -> bytes:
    return protobuf_batch(spans)


def _native(count: int = 3) -> bytes:
    return native_batch(*(native_span(f"{i:016x}") for i in range(1, count + 1)))


@pytest.mark.parametrize(("url", "content_type"), [(OTLP, PROTOBUF), (NATIVE, JSON)])
def test_past_its_daily_quota_an_account_gets_429_until_midnight_utc(
    world: TeamWorld, settings, clock, url: str, content_type: str
) -> None:
    body = _body() if url == OTLP else _native()
    encoding = Encoding.OTLP_PROTOBUF if url == OTLP else Encoding.NATIVE_JSON
    one_batch = _stored_size(body, world.team, encoding)
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = 2 * one_batch
    token = ingest_token(world.team)

    answers = [post(url, body, token=token, content_type=content_type) for _ in range(3)]

    assert [a.status_code for a in answers] == [200, 200, 429]
    refused = answers[2]
    assert refused["Retry-After"] == str(TO_MIDNIGHT)
    if url == OTLP:
        code, message = status_of(refused)
        assert code == RpcCode.RESOURCE_EXHAUSTED
    else:
        error = refused.json()["error"]
        code, message = error["code"], error["message"]
        assert code == "quota_exceeded"
    assert "daily quota" in message
    assert "INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY" in message
    assert RawBatch.objects.count() == 2


def test_another_account_still_gets_200_and_the_same_accounts_other_team_does_not(
    world: TeamWorld, settings, clock
) -> None:
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = _stored_size(_body(), world.team)
    post(OTLP, _body(), token=ingest_token(world.team))
    second_team = make_team("acme-staging", owner=world.owner)

    same_account = post(OTLP, _body(), token=ingest_token(second_team))
    other_account = post(OTLP, _body(), token=ingest_token(world.other_team))

    assert (same_account.status_code, other_account.status_code) == (429, 200)
    assert same_account["Retry-After"] == str(TO_MIDNIGHT)


def test_a_used_up_quota_refuses_before_the_body_is_decompressed(
    world: TeamWorld, settings, clock
) -> None:
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = _stored_size(_body(), world.team)
    token = ingest_token(world.team)
    assert post(OTLP, _body(), token=token).status_code == 200

    # Corrupt: decompressing it would answer 400, so a 429 shows it was never inflated.
    corrupt = gzipped(_body())[:-12]
    response = post(OTLP, corrupt, token=token, headers={"Content-Encoding": "gzip"})

    assert response.status_code == 429


def test_the_quota_is_renewed_at_midnight_utc(world: TeamWorld, settings, clock) -> None:
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = _stored_size(_body(), world.team)
    token = ingest_token(world.team)
    assert post(OTLP, _body(), token=token).status_code == 200
    assert post(OTLP, _body(), token=token).status_code == 429

    clock.time = lambda: NOW + TO_MIDNIGHT

    assert post(OTLP, _body(), token=token).status_code == 200


def test_the_batch_that_reaches_the_quota_is_the_last_one_accepted(
    world: TeamWorld, settings, clock
) -> None:
    small = _stored_size(_body(2), world.team)
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = 2 * small
    token = ingest_token(world.team)
    assert post(OTLP, _body(2), token=token).status_code == 200

    # Larger than what is left: taken all the same, rather than lose the day's last bytes.
    assert post(OTLP, _body(20), token=token).status_code == 200
    assert post(OTLP, _body(2), token=token).status_code == 429
    assert RawBatch.objects.filter(team=world.team).count() == 2


def test_bytes_of_a_batch_the_database_refused_are_given_back(
    world: TeamWorld, settings, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = _stored_size(_body(), world.team)
    token = ingest_token(world.team)

    def unavailable(**kwargs: object) -> None:
        raise OperationalError("connection refused")

    with monkeypatch.context() as patched:
        patched.setattr(intake, "accepted_batch_store", unavailable)
        assert post(OTLP, _body(), token=token).status_code == 503

    assert post(OTLP, _body(), token=token).status_code == 200


def test_a_zero_quota_turns_it_off(world: TeamWorld, settings, clock) -> None:
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = 0
    token = ingest_token(world.team)

    assert all(post(OTLP, _body(50), token=token).status_code == 200 for _ in range(5))
