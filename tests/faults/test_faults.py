"""Faults under traffic, against the real stack: nothing acknowledged is lost or doubled.

Each case sends spans with known totals over OTLP/HTTP to gunicorn, injects one fault
(a worker SIGKILLed mid-drain or mid-finalization, PostgreSQL or Redis restarted, the
database refusing writes), lets the stack recover, and then checks what it stored and
analyzed, what it left behind, what the alert receiver got and what the clients were
told. See docs/reliability.md.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.faults import faults
from tests.faults.cases import CaseResult
from tests.faults.faults import Inject
from tests.faults.stack import Stack

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.worker]

CaseRunner = Callable[[str, str, Inject, bool], CaseResult]


@dataclass(frozen=True)
class Case:
    name: str
    inject: Inject
    # The database goes away, while the case's alert is being delivered.
    database_away: bool = False
    needs_redis: bool = False


CASES = {
    "worker-mid-drain": Case(
        "worker SIGKILLed while storing batches, restarted", faults.worker_killed_mid_drain
    ),
    "worker-mid-finalization": Case(
        "worker SIGKILLed while finalizing traces, restarted",
        faults.worker_killed_mid_finalization,
    ),
    "postgres-restart": Case(
        "PostgreSQL stopped (immediate) and started", faults.postgres_restarted, database_away=True
    ),
    "redis-restart": Case(
        "Redis stopped and started empty", faults.redis_restarted, needs_redis=True
    ),
    "database-read-only": Case(
        "database refusing writes, then writable", faults.database_read_only, database_away=True
    ),
}

# Seen in some runs, with celery 5.7.0 and kombu 5.7.0: on losing the broker while a task
# is unacknowledged, the worker closes the broken connection, kombu tries to restore the
# task's message through it and fails ("'NoneType' object has no attribute 'hostname'",
# kombu/transport/redis.py, _connparams), and the worker exits. The supervisor restarts it.
EXITS_XFAIL = {
    "redis-restart": (
        "celery/kombu 5.7.0: the worker may exit when the broker goes away with a task "
        "unacknowledged (restoring it through the closed connection raises AttributeError)"
    ),
}


@pytest.fixture
def case_result(
    request: pytest.FixtureRequest, fault_stack: Stack, fault_case: CaseRunner
) -> CaseResult:
    key = request.param
    case = CASES[key]
    if case.needs_redis and fault_stack.redis is None:
        pytest.skip(
            "redis-server is not installed: restarting Redis needs a Redis server of the "
            "suite's own (the other cases ran on the broker that needs no server)"
        )
    return fault_case(key, case.name, case.inject, case.database_away)


def _cases(xfails: dict[str, str] | None = None, *, strict: bool = True) -> list[object]:
    xfails = xfails or {}
    return [
        pytest.param(key, marks=pytest.mark.xfail(strict=strict, reason=xfails[key]))
        if key in xfails
        else key
        for key in CASES
    ]


@pytest.mark.parametrize("case_result", _cases(), indirect=True)
def test_every_acknowledged_span_is_stored_exactly_once(case_result: CaseResult) -> None:
    storage = case_result.storage
    assert case_result.all_acknowledged, case_result.answers
    assert storage.lost_count == 0, storage
    assert storage.duplicates == 0, storage
    assert storage.unacknowledged == 0, storage
    assert storage.counters_off == [], storage
    assert storage.counted == storage.acknowledged > 0


@pytest.mark.parametrize("case_result", _cases(), indirect=True)
def test_every_acknowledged_trace_is_analyzed_once(case_result: CaseResult) -> None:
    analysis = case_result.analysis
    assert case_result.settled, case_result.logs
    assert analysis.final == analysis.traces > 0, analysis
    assert analysis.complete, analysis


@pytest.mark.parametrize("case_result", _cases(), indirect=True)
def test_no_work_is_left_stuck(case_result: CaseResult) -> None:
    left = case_result.leftovers
    assert left.raw_batches == 0, left
    assert left.raw_batches_set_aside == 0, left
    assert left.open_traces_overdue == 0, left
    assert left.quarantined_traces == 0, left
    assert left.quarantine_entries == case_result.quarantine_entries_before, left
    assert left.notifications_pending == 0, left


# Intermittent (a race in the broker client), hence not strict.
@pytest.mark.parametrize("case_result", _cases(EXITS_XFAIL, strict=False), indirect=True)
def test_no_process_exits_on_its_own(case_result: CaseResult) -> None:
    assert case_result.process_exits == []


@pytest.mark.parametrize("case_result", _cases(), indirect=True)
def test_each_alert_notification_arrives_once(case_result: CaseResult) -> None:
    received = Counter((incident, event) for incident, event, _ in case_result.webhooks)
    assert any(event == "alert.firing" for _, event in received), case_result.webhooks
    assert all(count == 1 for count in received.values()), case_result.webhooks
    assert len({hook_id for *_, hook_id in case_result.webhooks}) == len(case_result.webhooks)
    assert {n.status for n in case_result.notifications} == {"delivered"}
    assert len(case_result.notifications) == len(received)


@pytest.mark.parametrize("case_result", _cases(), indirect=True)
def test_clients_are_told_to_retry_and_then_succeed(case_result: CaseResult) -> None:
    answers = case_result.answers
    # Every answer was a success or a refusal that says when to retry; none went missing.
    assert set(answers) <= {"200", "429", "503"}, (answers, case_result.unanswered)
    assert case_result.refusals_without_retry_after == 0, answers
    if CASES[case_result.key].database_away:
        assert case_result.answers_during_fault.get("503", 0) > 0, case_result.answers_during_fault
    assert case_result.first_2xx_after_s is not None
