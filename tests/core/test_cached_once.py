"""cached_once: many requests missing the shared cache at once cost one computation."""

import threading
import time
from collections.abc import Callable

import pytest
from django.core.cache import cache

from apps.core.cached import cached_once

pytestmark = pytest.mark.usefixtures("clean_cache")


def slow(calls: list[int], value: int, seconds: float = 0.5) -> Callable[[], int]:
    def compute() -> int:
        calls.append(value)
        time.sleep(seconds)
        return value

    return compute


def test_concurrent_misses_wait_for_the_first_computation() -> None:
    calls: list[int] = []
    results: list[int] = []

    def request(value: int) -> None:
        results.append(cached_once("k", seconds=30, compute=slow(calls, value), wait_s=5))

    threads = [threading.Thread(target=request, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
        time.sleep(0.01)  # the first one claims the computation
    for thread in threads:
        thread.join()

    assert calls == [0]
    assert results == [0] * 8
    assert cache.get("k:computing") is None  # the claim is released


def test_a_hit_computes_nothing() -> None:
    calls: list[int] = []
    cached_once("k", seconds=30, compute=slow(calls, 1, 0), wait_s=1)
    assert cached_once("k", seconds=30, compute=slow(calls, 2, 0), wait_s=1) == 1
    assert calls == [1]


def test_a_failed_computation_lets_the_waiting_compute_themselves() -> None:
    def failing() -> int:
        time.sleep(0.3)
        raise RuntimeError("the database went away")

    errors: list[BaseException] = []

    def first() -> None:
        try:
            cached_once("k", seconds=30, compute=failing, wait_s=5)
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(0.05)
    started = time.monotonic()
    second = cached_once("k", seconds=30, compute=lambda: 7, wait_s=5)
    thread.join()

    assert second == 7
    assert len(errors) == 1
    assert time.monotonic() - started < 2  # not the whole wait: the claim went with the failure


def test_past_the_wait_a_request_computes_itself() -> None:
    cache.add("k:computing", 1, timeout=30)  # a computation that never finishes
    started = time.monotonic()
    assert cached_once("k", seconds=30, compute=lambda: 3, wait_s=0.5) == 3
    assert 0.5 <= time.monotonic() - started < 2
