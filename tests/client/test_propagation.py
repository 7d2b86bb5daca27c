"""A deadline across two real processes: the caller injects its context with the W3C
propagators, a downstream service (``downstream_service.py``, its own process using the
client) extracts it and continues the caller's deadline, or keeps its own when that
comes first."""

import json
import select
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from latency_budgets import Budgets
from opentelemetry import propagate

from tests.client.support import Spans

SCRIPT = Path(__file__).with_name("downstream_service.py")
# Two clocks read in two processes on a loaded machine: what "continues" allows.
SLACK_MS = 20.0


@pytest.fixture(scope="module")
def downstream() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 30)
        line = process.stdout.readline() if ready else ""
        if not line.strip().isdigit():
            process.kill()
            _, errors = process.communicate(timeout=10)
            raise RuntimeError(f"the downstream service did not start: {line!r}\n{errors}")
        yield f"http://127.0.0.1:{int(line)}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def call(url: str, headers: dict[str, str]) -> dict[str, Any]:
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - our loopback URL
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def test_the_downstream_continues_the_callers_deadline(downstream: str, spans: Spans) -> None:
    budgets = Budgets.from_documents([], tracer_provider=spans.provider)
    with budgets.request("caller", budget_ms=2000) as req:
        assert req.deadline_unix_ms is not None
        headers: dict[str, str] = {}
        propagate.inject(headers)
        before = req.remaining_ms
        started = time.monotonic()
        answer = call(f"{downstream}/?pipeline=downstream", headers)
        elapsed_ms = (time.monotonic() - started) * 1000
        assert req.span is not None
        caller_span = req.span.get_span_context()
    # On the wire: the protocol's baggage member, whole Unix milliseconds.
    assert headers["baggage"] == f"latency_budget.deadline={int(req.deadline_unix_ms)}"
    assert answer["inherited"] is True
    assert answer["deadline_unix_ms"] == int(req.deadline_unix_ms)
    remaining = answer["remaining_ms"]
    assert before - elapsed_ms - SLACK_MS <= remaining <= before + SLACK_MS
    # The trace goes on as well: the downstream's request span is the caller's child.
    assert answer["trace_id"] == f"{caller_span.trace_id:032x}"
    assert answer["parent_span_id"] == f"{caller_span.span_id:016x}"
    # And what it calls gets the same deadline.
    assert answer["baggage"] == str(int(req.deadline_unix_ms))


def test_a_downstream_with_an_earlier_deadline_of_its_own_keeps_it(downstream: str) -> None:
    budgets = Budgets.from_documents([])
    with budgets.request("caller", budget_ms=2000) as req:
        assert req.deadline_unix_ms is not None
        headers: dict[str, str] = {}
        propagate.inject(headers)
        tight = call(f"{downstream}/?pipeline=tight", headers)
        before = req.remaining_ms
        started = time.monotonic()
        loose = call(f"{downstream}/?pipeline=loose", headers)
        elapsed_ms = (time.monotonic() - started) * 1000
    # Its own 300 ms come first: its deadline, and the one it passes on.
    assert tight["inherited"] is False
    assert 300 - SLACK_MS * 5 < tight["remaining_ms"] <= 300
    assert tight["deadline_unix_ms"] < req.deadline_unix_ms
    assert tight["baggage"] == str(int(tight["deadline_unix_ms"]))
    # Its own 60 s come after the caller's 2 s: the caller's.
    assert loose["inherited"] is True
    assert before - elapsed_ms - SLACK_MS <= loose["remaining_ms"] <= before + SLACK_MS


def test_time_spent_before_the_downstream_counts_against_the_deadline(downstream: str) -> None:
    """Absolute: a deadline that passed while the message waited is past downstream."""
    past = int(time.time() * 1000) - 500
    answer = call(
        f"{downstream}/?pipeline=downstream", {"baggage": f"latency_budget.deadline={past}"}
    )
    assert answer["inherited"] is True
    assert -500 - SLACK_MS * 5 < answer["remaining_ms"] <= -500


@pytest.mark.parametrize("value", ["12.5", "soon", "-100", "1e12"])
def test_a_deadline_that_is_not_a_decimal_integer_is_ignored(downstream: str, value: str) -> None:
    answer = call(
        f"{downstream}/?pipeline=downstream", {"baggage": f"latency_budget.deadline={value}"}
    )
    assert answer["inherited"] is False
    assert answer["remaining_ms"] is None
    answer = call(f"{downstream}/?pipeline=tight", {"baggage": f"latency_budget.deadline={value}"})
    assert answer["inherited"] is False
    assert 250 < answer["remaining_ms"] <= 300


def test_a_downstream_process_keeps_the_callers_holdout_and_draws_none_of_its_own(
    downstream: str,
) -> None:
    """``eager`` holds out every request it starts; one continuing a caller's deadline is
    in the holdout exactly when the caller's baggage says so."""
    own = call(f"{downstream}/?pipeline=eager", {})
    assert own["holdout"] is True
    assert own["holdout_baggage"] == "1"
    held = Budgets.from_documents([], holdout_percent=100)
    with held.request("caller", budget_ms=2000):
        headers: dict[str, str] = {}
        propagate.inject(headers)
    assert "latency_budget.holdout=1" in headers["baggage"].split(",")
    assert call(f"{downstream}/?pipeline=downstream", headers)["holdout"] is True
    with Budgets.from_documents([]).request("caller", budget_ms=2000):
        headers = {}
        propagate.inject(headers)
    answer = call(f"{downstream}/?pipeline=eager", headers)
    assert answer["inherited"] is True
    assert answer["holdout"] is False
    assert answer["holdout_baggage"] is None
