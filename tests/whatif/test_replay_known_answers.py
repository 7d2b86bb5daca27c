"""Replays of hand-built traces whose answers are worked out by hand, one per operation."""

import pytest
from django.core.exceptions import ValidationError

from apps.whatif.changes import Change
from tests.whatif.models import by_name, e2e_ms, model_of, ms_span, replayed, stage_ms


def serial_chain() -> list:
    """Root 0-1000 ms: a 0-100, b 100-300, c 310-600; the root's own time is the rest."""
    return [
        ms_span(1, None, 0, 1000, "server"),
        ms_span(2, 1, 0, 100, "a"),
        ms_span(3, 1, 100, 300, "b"),
        ms_span(4, 1, 310, 600, "c"),
    ]


CHAIN = by_name("a", "b", "c")


def test_a_replay_without_changes_is_the_trace_as_it_ran() -> None:
    model = model_of([serial_chain()], CHAIN)
    result = replayed(model)
    assert e2e_ms(result) == [1000.0]
    assert [stage_ms(result, model, s) for s in "abc"] == [[100.0], [200.0], [290.0]]
    assert [stage_ms(result, model, s, critical=True) for s in "abc"] == [[100.0], [200.0], [290.0]]
    assert round(result.critical_ns[0, -1] / 1e6, 3) == 410.0  # the root's own time


@pytest.mark.parametrize(
    ("change", "e2e", "stage", "wall"),
    [
        (Change("b", "scale", factor=0.5), 900.0, "b", 100.0),
        (Change("b", "scale", factor=1.0), 1000.0, "b", 200.0),
        (Change("b", "scale", factor=2.0), 1200.0, "b", 400.0),
        (Change("c", "shift", ms=-90), 910.0, "c", 200.0),
        (Change("c", "shift", ms=-1000), 710.0, "c", 0.0),  # never below zero
        (Change("c", "shift", ms=50), 1050.0, "c", 340.0),
        (Change("a", "remove"), 900.0, "a", 0.0),
        (Change("c", "cap", ms=100), 810.0, "c", 100.0),
        (Change("c", "cap", ms=500), 1000.0, "c", 290.0),  # under its cap already
        (Change("b", "cache", hit_ratio=1.0, hit_ms=20), 820.0, "b", 20.0),
        (Change("b", "cache", hit_ratio=0.0, hit_ms=20), 1000.0, "b", 200.0),
    ],
)
def test_each_operation_on_a_serial_chain(
    change: Change, e2e: float, stage: str, wall: float
) -> None:
    model = model_of([serial_chain()], CHAIN)
    result = replayed(model, change)
    assert e2e_ms(result) == [e2e]
    assert stage_ms(result, model, stage) == [wall]
    # Whatever the change, the critical path still accounts for every millisecond.
    assert round(result.critical_ns[0].sum() / 1e6, 3) == e2e


def test_a_cap_at_the_budget_uses_the_stage_budget() -> None:
    model = model_of([serial_chain()], CHAIN)
    result = replayed(model, Change("c", "cap"), budgets={"c": 150})
    assert e2e_ms(result) == [860.0]


def test_parallel_starts_the_second_with_the_first_and_the_next_waits_for_both() -> None:
    model = model_of([serial_chain()], CHAIN)
    result = replayed(model, Change("a", "parallel", with_stage="b"))
    # b starts with a at 0 and ends at 200; c waits for both, keeps its 10 ms gap: 210-500.
    assert e2e_ms(result) == [900.0]
    assert stage_ms(result, model, "a", critical=True) == [0.0]
    assert stage_ms(result, model, "b", critical=True) == [200.0]


def test_parallel_is_symmetric_and_leaves_unrelated_stages_in_order() -> None:
    model = model_of([serial_chain()], CHAIN)
    assert e2e_ms(replayed(model, Change("b", "parallel", with_stage="a"))) == [900.0]
    # a and c never followed each other directly: nothing to run concurrently.
    assert e2e_ms(replayed(model, Change("a", "parallel", with_stage="c"))) == [1000.0]


def test_parallel_calls_of_one_stage() -> None:
    trace = [
        ms_span(1, None, 0, 700, "server"),
        ms_span(2, 1, 0, 200, "tool search"),
        ms_span(3, 1, 205, 405, "tool orders"),
        ms_span(4, 1, 410, 690, "gen"),
    ]
    model = model_of([trace], by_name("tool", "gen"))
    result = replayed(model, Change("tool", "parallel", with_stage="tool"))
    # The second call starts 5 ms after the first; gen waits for both (205) plus 5 ms.
    assert e2e_ms(result) == [500.0]


def fan_out() -> list:
    """Root 0-500: wrapper w 10-310 around shards r 20-200, 20-300, 25-150; then g 320-480."""
    return [
        ms_span(1, None, 0, 500, "server"),
        ms_span(2, 1, 10, 310, "wrapper"),
        ms_span(3, 2, 20, 200, "r1"),
        ms_span(4, 2, 20, 300, "r2"),
        ms_span(5, 2, 25, 150, "r3"),
        ms_span(6, 1, 320, 480, "g"),
    ]


def test_a_fan_out_waits_for_its_slowest_branch() -> None:
    model = model_of([fan_out()], by_name("r", "g"))
    before = replayed(model)
    assert e2e_ms(before) == [500.0]
    assert stage_ms(before, model, "r") == [280.0]  # the union of the shards
    assert stage_ms(before, model, "r", critical=True) == [280.0]
    assert stage_ms(before, model, "g", critical=True) == [160.0]
    # Halved, the slowest shard ends at 160; the wrapper's 10 ms tail, 10 ms gap, g 160, 20.
    assert e2e_ms(replayed(model, Change("r", "scale", factor=0.5))) == [360.0]
    # Capped at 100 ms, the shards end at 120, 120 and 125.
    assert e2e_ms(replayed(model, Change("r", "cap", ms=100))) == [325.0]
    # A cache hit takes the stage to 20 ms: the slowest shard to 20 ms.
    assert e2e_ms(replayed(model, Change("r", "cache", hit_ratio=1, hit_ms=20))) == [240.0]


def nested() -> list:
    """Root 0-1000: p 0-800 holding c 100-300 and c 300-700; the root's tail 800-1000."""
    return [
        ms_span(1, None, 0, 1000, "server"),
        ms_span(2, 1, 0, 800, "p"),
        ms_span(3, 2, 100, 300, "c1"),
        ms_span(4, 2, 300, 700, "c2"),
    ]


@pytest.mark.parametrize(
    ("change", "e2e"),
    [
        (None, 1000.0),
        (Change("p", "scale", factor=0.5), 900.0),  # only p's own 100 + 100 ms
        (Change("c", "scale", factor=0.5), 700.0),
        (Change("c", "remove"), 400.0),
        (Change("p", "cap", ms=500), 700.0),  # the span is cut short, children and all
    ],
)
def test_a_span_keeps_its_own_time_around_its_children(change: Change | None, e2e: float) -> None:
    model = model_of([nested()], by_name("p", "c"))
    result = replayed(model, *([change] if change else []))
    assert e2e_ms(result) == [e2e]
    assert round(result.critical_ns[0].sum() / 1e6, 3) == e2e


def llm_call() -> list:
    """Root 0-1000: an LLM span 100-900 whose first token comes at 300 ms."""
    return [
        ms_span(1, None, 0, 1000, "server"),
        ms_span(2, 1, 100, 900, "llm chat", events=[("first_token", 0)]),
    ]


def _with_token(trace: list, token_ms: float) -> list:
    from tests.builders.spans import T0
    from tests.timing import MS

    trace[1].events = (("first_token", T0 + round(token_ms * MS)),)
    return trace


@pytest.mark.parametrize(
    ("change", "e2e", "ttft", "gen"),
    [
        (None, 1000.0, 200.0, 600.0),
        (Change("gen", "scale", factor=0.5), 700.0, 200.0, 300.0),
        (Change("ttft", "cap", ms=100), 900.0, 100.0, 600.0),
        (Change("ttft", "remove"), 800.0, 0.0, 600.0),
        (Change("ttft", "shift", ms=50), 1050.0, 250.0, 600.0),
    ],
)
def test_an_llm_span_splits_at_its_first_token(
    change: Change | None, e2e: float, ttft: float, gen: float
) -> None:
    model = model_of([_with_token(llm_call(), 300)], by_name(split=("ttft", "gen")))
    result = replayed(model, *([change] if change else []))
    assert e2e_ms(result) == [e2e]
    assert stage_ms(result, model, "ttft") == [ttft]
    assert stage_ms(result, model, "gen") == [gen]


def async_span() -> list:
    """Root 0-500: a 0-200, then b 210-480; x 100-900 outlives the root (fire and forget)."""
    return [
        ms_span(1, None, 0, 500, "server"),
        ms_span(2, 1, 0, 200, "a"),
        ms_span(3, 1, 100, 900, "x"),
        ms_span(4, 1, 210, 480, "b"),
    ]


def test_a_span_that_outlives_its_parent_is_off_the_critical_path() -> None:
    model = model_of([async_span()], by_name("a", "b", "x"))
    before = replayed(model)
    assert e2e_ms(before) == [500.0]
    assert stage_ms(before, model, "x") == [800.0]
    assert stage_ms(before, model, "x", critical=True) == [0.0]
    assert e2e_ms(replayed(model, Change("x", "scale", factor=10))) == [500.0]
    assert e2e_ms(replayed(model, Change("x", "remove"))) == [500.0]
    assert e2e_ms(replayed(model, Change("b", "scale", factor=0.5))) == [365.0]


def test_many_traces_replay_together_each_as_it_would_alone() -> None:
    traces = [serial_chain(), fan_out(), nested()]
    matcher = by_name("a", "b", "c", "r", "g", "p")
    together = e2e_ms(replayed(model_of(traces, matcher), Change("c", "scale", factor=0.5)))
    alone = [
        e2e_ms(replayed(model_of([t], matcher), Change("c", "scale", factor=0.5)))[0]
        for t in traces
    ]
    assert together == alone == [855.0, 500.0, 700.0]


def chains_with_b(*b_ms: float) -> list[list]:
    """One serial chain per time of b: a 0-100, b for ``b_ms``, c 290 ms after it."""
    traces = []
    for b in b_ms:
        traces.append(
            [
                ms_span(1, None, 0, 100 + b + 300, "server"),
                ms_span(2, 1, 0, 100, "a"),
                ms_span(3, 1, 100, 100 + b, "b"),
                ms_span(4, 1, 110 + b, 400 + b, "c"),
            ]
        )
    return traces


def test_a_fallback_replaces_a_time_past_its_timeout_by_the_timeout_and_the_fallback() -> None:
    model = model_of(chains_with_b(200, 900, 50), CHAIN)
    result = replayed(model, Change("b", "fallback", ms=300, fallback_ms=120))
    # Only the 900 ms call ran past 300 ms: it takes 300 + 120.
    assert stage_ms(result, model, "b") == [200.0, 420.0, 50.0]
    assert e2e_ms(result) == [600.0, 820.0, 450.0]
    for row in result.critical_ns:
        assert round(row.sum() / 1e6, 3) in (600.0, 820.0, 450.0)


def test_a_hedge_takes_the_sooner_of_the_first_and_the_delay_plus_a_second_attempt() -> None:
    times = [100.0, 120.0, 140.0, 160.0, 2000.0]
    model = model_of(chains_with_b(*times), CHAIN)
    result = replayed(model, Change("b", "hedge", ms=500))
    walls = stage_ms(result, model, "b")
    # Under the delay, nothing changes; the slow one becomes 500 ms plus a second
    # attempt drawn from b's own times, never later than it was.
    assert walls[:4] == times[:4]
    # (The draw for this trace is b's 100 ms.)
    assert walls[4] == 600.0
    # The same scenario on the same traces draws the same second attempt.
    assert stage_ms(replayed(model, Change("b", "hedge", ms=500)), model, "b") == walls


def test_the_levers_read_and_write_their_compact_form() -> None:
    from apps.whatif.changes import change_from_data, change_from_text

    stages = {"b": object(), "ttft": object()}
    fallback = change_from_text("ttft:fallback:800:300", stages=stages)
    assert fallback == Change("ttft", "fallback", ms=800.0, fallback_ms=300.0)
    assert fallback.as_text() == "ttft:fallback:800:300"
    assert fallback.as_data() == {
        "stage": "ttft", "op": "fallback", "ms": 800.0, "fallback_ms": 300.0,
    }  # fmt: skip
    hedge = change_from_data({"stage": "b", "op": "hedge", "ms": 250}, stages=stages)
    assert hedge.as_text() == "b:hedge:250"
    for bad in ("b:hedge:0", "b:hedge", "b:fallback:100", "b:fallback:100:-1", "b:hedge:x"):
        with pytest.raises(ValidationError):
            change_from_text(bad, stages=stages)
