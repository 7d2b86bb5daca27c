"""The ingest page shows today's stored bytes of the team's account, its quota, and refusals."""

import pytest

from apps.ingest.services.batches import DECODERS
from apps.ingest.services.span_rows import span_rows
from tests.conftest import TeamWorld, client_for
from tests.ingest.endpoint_helpers import ingest_token, post, protobuf_batch

pytestmark = pytest.mark.usefixtures("clean_cache")
OTLP = "/v1/traces"


def _page(world: TeamWorld, user: object) -> tuple[int, str]:
    response = client_for(user).get(f"/teams/{world.team.slug}/ingest-tokens/")  # type: ignore[arg-type]
    return response.status_code, response.content.decode()


def _batch_size(world: TeamWorld) -> int:
    return len(span_rows(world.team.pk, DECODERS[1](protobuf_batch(3)).spans))


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_every_member_sees_todays_stored_bytes_and_the_quota(
    world: TeamWorld, settings, role: str
) -> None:
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = 10 * 1024 * 1024
    assert post(OTLP, protobuf_batch(3), token=ingest_token(world.team)).status_code == 200

    status, html = _page(world, getattr(world, role))

    assert status == 200
    assert 'id="ingest-usage"' in html
    # filesizeformat separates a number from its unit with a no-break space.
    assert f"<strong>{_batch_size(world)}\xa0bytes</strong> of 10.0\xa0MB (0%)" in html
    assert f'value="{_batch_size(world)}"' in html
    assert "renewed at 00:00 UTC" in html
    assert '<span class="badge ok">accepted</span>' in html


def test_an_outsider_gets_404(world: TeamWorld) -> None:
    status, html = _page(world, world.outsider)

    assert status == 404
    assert "ingest-usage" not in html


def test_the_page_says_when_requests_are_refused_for_the_quota(world: TeamWorld, settings) -> None:
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = _batch_size(world)
    token = ingest_token(world.team)
    post(OTLP, protobuf_batch(3), token=token)
    assert post(OTLP, protobuf_batch(3), token=token).status_code == 429

    _, html = _page(world, world.viewer)

    assert "(100%)" in html
    assert '<span class="badge over">refused</span>' in html
    assert "senders get 429 with Retry-After until 00:00 UTC" in html
    assert "the last refused at" in html


def test_without_a_quota_the_page_says_so(world: TeamWorld, settings) -> None:
    settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = 0

    _, html = _page(world, world.owner)

    assert '<dd data-role="daily-quota">none</dd>' in html


def test_an_unreachable_cache_leaves_the_page_up(world: TeamWorld, settings) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "apps.core.redis_cache.ReusingRedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
        }
    }

    status, html = _page(world, world.owner)

    assert status == 200
    assert "the shared cache is unreachable" in html
