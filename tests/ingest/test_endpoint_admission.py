"""Who may send, how much, and when to come back: rate limit, backlog, database, tenancy."""

from collections.abc import Callable
from types import SimpleNamespace

import psycopg.errors
import pytest
from django.db import InterfaceError, InternalError, OperationalError, connection
from django.test.utils import CaptureQueriesContext

from apps.ingest import ratelimit
from apps.ingest.decoding import RpcCode
from apps.ingest.models import Encoding, RawBatch, Trace
from apps.ingest.ratelimit import WINDOW_S, rate_limit_consume
from apps.ingest.services import intake
from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
from tests.builders.stored_spans import stored_spans
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import (
    JSON,
    PROTOBUF,
    assert_nothing_written,
    ingest_token,
    native_batch,
    native_span,
    post,
    protobuf_batch,
    rate_window_fresh,
    status_of,
)

OTLP = "/v1/traces"
NATIVE = "/api/v1/spans"
NOW = 1_000_002.0  # two seconds into a five-second window


pytestmark = pytest.mark.usefixtures("clean_cache")


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # The early check reads the clock itself; the request path reads it once for the rest.
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(time=lambda: NOW))
    monkeypatch.setattr(intake, "time", SimpleNamespace(time=lambda: NOW))


# --- Rate limit -----------------------------------------------------------------------


def test_a_token_over_its_span_rate_gets_429_with_retry_after(
    world: TeamWorld, settings, frozen_clock
) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1  # five spans per window
    rate_window_fresh()
    token = ingest_token(world.team)

    first = post(OTLP, protobuf_batch(3), token=token)
    second = post(OTLP, protobuf_batch(3), token=token)

    assert first.status_code == 200
    assert second.status_code == 429
    assert second["Retry-After"] == "3"  # the window ends three seconds from now
    code, message = status_of(second)
    assert code == RpcCode.RESOURCE_EXHAUSTED
    assert "1 spans per second" in message
    assert RawBatch.objects.get().span_count == 3


def test_the_rate_is_counted_per_account_whatever_its_tokens(
    world: TeamWorld, settings, frozen_clock
) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1
    rate_window_fresh()
    busy, fresh = ingest_token(world.team, "busy"), ingest_token(world.team, "fresh")
    post(OTLP, protobuf_batch(5), token=busy)

    assert post(OTLP, protobuf_batch(2), token=busy).status_code == 429
    # A second token of the same team shares its allowance: minting tokens gains nothing.
    assert post(OTLP, protobuf_batch(2), token=fresh).status_code == 429


def test_one_account_at_its_rate_does_not_throttle_another(
    world: TeamWorld, settings, frozen_clock
) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1
    rate_window_fresh()
    busy, other = ingest_token(world.team), ingest_token(world.other_team)
    post(OTLP, protobuf_batch(5), token=busy)

    assert post(OTLP, protobuf_batch(2), token=busy).status_code == 429
    assert post(OTLP, protobuf_batch(2), token=other).status_code == 200


def test_the_native_endpoint_is_rate_limited_too(world: TeamWorld, settings, frozen_clock) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1
    rate_window_fresh()
    token = ingest_token(world.team)
    spans = [native_span(f"{i:016x}") for i in range(1, 5)]
    assert post(NATIVE, native_batch(*spans), content_type=JSON, token=token).status_code == 200

    response = post(NATIVE, native_batch(*spans), content_type=JSON, token=token)

    assert response.status_code == 429
    assert response["Retry-After"] == "3"
    assert response.json()["error"]["code"] == "throttled"
    assert RawBatch.objects.count() == 1


def test_refused_spans_do_not_use_up_the_allowance(settings) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 2  # ten spans per window
    rate_window_fresh()

    assert rate_limit_consume(account_key="user:1", spans=8, now=NOW) == 0
    assert rate_limit_consume(account_key="user:1", spans=5, now=NOW) == 3
    assert rate_limit_consume(account_key="user:1", spans=5, now=NOW) == 3
    assert rate_limit_consume(account_key="user:1", spans=2, now=NOW) == 0


def test_a_new_window_starts_a_new_count(settings) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1
    rate_window_fresh()
    assert rate_limit_consume(account_key="user:1", spans=5, now=NOW) == 0
    assert rate_limit_consume(account_key="user:1", spans=1, now=NOW) > 0

    assert rate_limit_consume(account_key="user:1", spans=5, now=NOW + WINDOW_S) == 0


def test_a_lone_batch_larger_than_a_window_passes_rather_than_never(settings) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1
    rate_window_fresh()

    assert rate_limit_consume(account_key="user:1", spans=512, now=NOW) == 0
    assert rate_limit_consume(account_key="user:1", spans=1, now=NOW) > 0


def test_a_zero_rate_limit_turns_limiting_off(settings) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 0

    assert rate_limit_consume(account_key="user:1", spans=10**9, now=NOW) == 0


# --- Backlog ------------------------------------------------------------------------


def _backlog(team: object, spans: int) -> None:
    raw_batch_store(
        team=team, token=None, encoding=Encoding.OTLP_PROTOBUF,  # type: ignore[arg-type]
        body=protobuf_batch(spans), span_count=spans,
    )  # fmt: skip


@pytest.mark.parametrize(("url", "content_type"), [(OTLP, PROTOBUF), (NATIVE, JSON)])
def test_an_account_over_its_backlog_gets_503_with_retry_after(
    world: TeamWorld, settings, url: str, content_type: str
) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 2
    _backlog(world.team, 3)
    body = protobuf_batch() if url == OTLP else native_batch(native_span("01" * 8))

    response = post(url, body, token=ingest_token(world.team), content_type=content_type)

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert RawBatch.objects.count() == 1  # only the backlog itself


@pytest.mark.parametrize(("url", "content_type"), [(OTLP, PROTOBUF), (NATIVE, JSON)])
def test_one_account_at_its_backlog_cap_does_not_block_another(
    world: TeamWorld, settings, url: str, content_type: str
) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 2
    _backlog(world.other_team, 3)
    body = protobuf_batch() if url == OTLP else native_batch(native_span("01" * 8))

    refused = post(url, body, token=ingest_token(world.other_team), content_type=content_type)
    admitted = post(url, body, token=ingest_token(world.team), content_type=content_type)

    assert (refused.status_code, admitted.status_code) == (503, 200)
    assert RawBatch.objects.filter(team=world.team).count() == 1


def test_past_the_total_backlog_only_the_accounts_over_an_even_share_wait(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 0
    settings.INGEST_MAX_BACKLOG_SPANS = 10  # two teams with a backlog: five spans each
    _backlog(world.other_team, 12)
    _backlog(world.team, 1)

    heavy = post(OTLP, protobuf_batch(), token=ingest_token(world.other_team))
    light = post(OTLP, protobuf_batch(), token=ingest_token(world.team))

    assert (heavy.status_code, light.status_code) == (503, 200)


def test_the_backlog_depth_is_read_from_the_database_at_most_once_a_second(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 1000
    token = ingest_token(world.team)

    with CaptureQueriesContext(connection) as first:
        assert post(OTLP, protobuf_batch(), token=token).status_code == 200
    with CaptureQueriesContext(connection) as second:
        assert post(OTLP, protobuf_batch(), token=token).status_code == 200

    def sums(queries: CaptureQueriesContext) -> int:
        return sum('SUM("ingest_rawbatch"."span_count")' in q["sql"] for q in queries)

    assert (sums(first), sums(second)) == (1, 0)


def test_a_backlog_under_the_limit_lets_batches_in(world: TeamWorld, settings) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 3
    token = ingest_token(world.team)

    assert post(OTLP, protobuf_batch(3), token=token).status_code == 200


# --- Database unavailable -----------------------------------------------------------


def _failing(error: type[Exception]) -> Callable[..., None]:
    def fail(**kwargs: object) -> None:
        raise error("connection refused")

    return fail


@pytest.mark.parametrize("error", [OperationalError, InterfaceError])
def test_a_database_failure_while_storing_gets_503_with_retry_after(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    token = ingest_token(world.team)
    monkeypatch.setattr(intake, "accepted_batch_store", _failing(error))

    response = post(OTLP, protobuf_batch(), token=token)

    assert response.status_code == 503
    assert response["Retry-After"] == "10"
    code, message = status_of(response)
    assert code == RpcCode.UNAVAILABLE
    assert "database" in message
    assert_nothing_written()


def test_a_database_failure_while_authenticating_gets_503(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = ingest_token(world.team)
    monkeypatch.setattr("apps.ingest.auth.ingest_token_authenticate", _failing(OperationalError))

    otlp = post(OTLP, protobuf_batch(), token=token)
    native = post(NATIVE, native_batch(native_span("01" * 8)), content_type=JSON, token=token)

    assert (otlp.status_code, native.status_code) == (503, 503)
    assert otlp["Retry-After"] == native["Retry-After"] == "10"
    assert native.json()["error"]["code"] == "unavailable"
    assert_nothing_written()


def test_the_native_endpoint_answers_503_when_storing_fails(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = ingest_token(world.team)
    monkeypatch.setattr(intake, "accepted_batch_store", _failing(OperationalError))

    response = post(NATIVE, native_batch(native_span("01" * 8)), content_type=JSON, token=token)

    assert response.status_code == 503
    assert response["Retry-After"] == "10"
    assert response.json() == {
        "error": {"code": "unavailable", "message": "the database is unavailable; retry later"}
    }
    assert_nothing_written()


# --- Tenancy ------------------------------------------------------------------------


def test_a_teams_token_writes_only_into_its_own_team(world: TeamWorld) -> None:
    ours, theirs = ingest_token(world.team), ingest_token(world.other_team)
    same_trace = protobuf_batch(3)

    assert post(OTLP, same_trace, token=ours).status_code == 200
    assert post(OTLP, same_trace, token=theirs).status_code == 200
    native = native_batch(native_span("0a" * 8))
    assert post(NATIVE, native, content_type=JSON, token=theirs).status_code == 200

    assert sorted(RawBatch.objects.values_list("team__slug", "token__team__slug")) == [
        ("acme", "acme"),
        ("globex", "globex"),
        ("globex", "globex"),
    ]
    raw_batches_drain()
    assert Trace.objects.filter(team=world.team).count() == 1
    assert Trace.objects.filter(team=world.other_team).count() == 2
    assert len(stored_spans(team=world.team)) == 3
    assert len(stored_spans(team=world.other_team)) == 4


def test_writes_refused_by_the_database_get_503_with_retry_after(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = ingest_token(world.team)

    def read_only(**kwargs: object) -> None:
        error = InternalError("cannot execute INSERT in a read-only transaction")
        error.__cause__ = psycopg.errors.ReadOnlySqlTransaction()
        raise error

    monkeypatch.setattr(intake, "accepted_batch_store", read_only)

    response = post(OTLP, protobuf_batch(), token=token)

    assert response.status_code == 503
    assert response["Retry-After"] == "10"
    assert_nothing_written()


UNREACHABLE_CACHE = {
    "default": {
        "BACKEND": "apps.core.redis_cache.ReusingRedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
    }
}


@pytest.mark.parametrize(("url", "content_type"), [(OTLP, PROTOBUF), (NATIVE, JSON)])
def test_an_unreachable_cache_admits_spans_rather_than_answer_500(
    world: TeamWorld, settings, url: str, content_type: str
) -> None:
    token = ingest_token(world.team)
    body = protobuf_batch() if url == OTLP else native_batch(native_span("01" * 8))
    settings.CACHES = UNREACHABLE_CACHE

    response = post(url, body, token=token, content_type=content_type)

    assert response.status_code == 200
    assert RawBatch.objects.count() == 1


def test_without_the_cache_the_backlog_is_still_enforced(world: TeamWorld, settings) -> None:
    settings.INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = 2
    _backlog(world.team, 3)
    token = ingest_token(world.team)
    settings.CACHES = UNREACHABLE_CACHE

    assert post(OTLP, protobuf_batch(), token=token).status_code == 503
