"""The Redis cache backend keeps one client per pool and behaves as Django's."""

import threading
from collections.abc import Iterator

import pytest
from django.conf import settings

from apps.core.redis_cache import ReusingRedisCache

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL")


@pytest.fixture
def cache() -> Iterator[ReusingRedisCache]:
    backend = ReusingRedisCache(settings.REDIS_URL, {"KEY_PREFIX": "redis-cache-test"})
    backend.clear()
    yield backend
    backend.clear()


def test_every_call_goes_through_one_client(cache: ReusingRedisCache) -> None:
    cache.set("a", {"value": 1}, 30)
    client = cache._cache.get_client(write=True)
    assert cache.get("a") == {"value": 1}
    assert cache.add("a", 2, 30) is False
    assert cache.add("b", 2, 30) is True
    assert cache.incr("b", 3) == 5
    cache.delete("a")
    assert cache.get("a", "gone") == "gone"
    assert cache._cache.get_client() is client
    assert cache._cache.get_client(write=True) is client


def test_threads_share_the_client_safely(cache: ReusingRedisCache) -> None:
    cache.set("n", 0, 30)

    def bump() -> None:
        for _ in range(200):
            cache.incr("n")

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.get("n") == 800


def test_the_configured_cache_is_this_backend() -> None:
    assert settings.CACHES["default"]["BACKEND"] == "apps.core.redis_cache.ReusingRedisCache"
