"""What every fuzz test checks of a decoder's answer, and of its running time."""

import gc
import math
import time
from collections.abc import Callable
from typing import Any

import msgspec

from apps.ingest.decoding import DecodeError, DecodeResult
from apps.ingest.decoding.records import KINDS, MAX_ERRORS, MAX_TIME_NS, STATUSES


def decoded(decode: Callable[[bytes], DecodeResult], body: bytes) -> DecodeResult | None:
    """The decoder's result, checked, or None when it refused the body with a DecodeError.

    Any other exception propagates and fails the test: that is what the suite looks for.
    """
    try:
        result = decode(body)
    except DecodeError:
        return None
    result_check(result)
    return result


def result_check(result: DecodeResult) -> None:
    """Counts that add up, and records that the storage layer can take as they are."""
    assert result.rejected == sum(result.reasons.values())
    assert result.rejected >= 0
    assert result.dropped >= 0
    # The response names a few problems, never one per span.
    assert len(result.errors) <= 2 * MAX_ERRORS
    assert isinstance(result.error_message, str)
    for span in result.spans:
        record_check(span)


def record_check(span: Any) -> None:
    assert len(span.trace_id) == 16
    assert span.trace_id != bytes(16)
    assert len(span.span_id) == 8
    assert span.span_id != bytes(8)
    assert span.parent_span_id is None or len(span.parent_span_id) == 8
    assert span.parent_span_id != bytes(8)
    assert span.name
    assert 0 < span.start_ns <= span.end_ns <= MAX_TIME_NS
    assert span.kind in KINDS
    assert span.status in STATUSES
    assert isinstance(span.status_message, str)
    assert isinstance(span.service, str)
    assert span.service
    for attributes in (span.attributes, span.resource, *(e.attributes for e in span.events)):
        assert all(isinstance(key, str) for key in attributes)
        json_safe_check(attributes)
    for event in span.events:
        assert isinstance(event.name, str)
        assert isinstance(event.time_ns, int)
    # Stored as jsonb: every value must encode.
    msgspec.json.encode([span.attributes, span.resource, span.events])


def json_safe_check(value: Any) -> None:
    """Only JSON's types, and no float JSON cannot write (NaN, infinities)."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str)
            json_safe_check(item)
    elif isinstance(value, list):
        for item in value:
            json_safe_check(item)
    elif isinstance(value, float):
        assert math.isfinite(value)
    else:
        assert value is None or isinstance(value, str | int | bool)


def best_time(run: Callable[[], object], repeat: int = 3) -> float:
    """The fastest of a few runs: the least disturbed by whatever else the machine does.

    The garbage collector is off while a run is timed, as ``timeit`` has it: late in a
    long session the heap holds every earlier test's leftovers, and a full collection
    that happens to fall in one run took longer than the run itself. Those leftovers are
    frozen meanwhile (set aside from the collector, in constant time), so that the
    collection before each run walks only what the runs made: walking the whole heap of
    a long session took seconds each time, the better part of a check's cost."""
    times = []
    gc.freeze()
    try:
        for _ in range(repeat):
            gc.collect()
            gc.disable()
            try:
                started = time.perf_counter()
                run()
                times.append(time.perf_counter() - started)
            finally:
                gc.enable()
    finally:
        gc.unfreeze()
    return min(times)


def roughly_linear_check(
    run: Callable[[Any], object],
    small: Any,
    large: Any,
    factor: int,
    *,
    slack_s: float = 0.05,
    repeat: int = 3,
) -> None:
    """``large`` is ``factor`` times ``small``; its run may take a few times longer than
    ``factor`` times the small run (noise), never the square of it."""
    small_s = best_time(lambda: run(small), repeat)
    large_s = best_time(lambda: run(large), repeat)
    assert large_s <= 3 * factor * small_s + slack_s, (small_s, large_s)
