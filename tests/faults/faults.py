"""The faults, each injected into the running stack; each returns when and what it did.

A worker is killed at a chosen point of its work: the suite watches the private
server's ``pg_stat_activity`` and sends SIGKILL to the worker and its pool processes
while one of them is inside the task's transaction at that statement. The database
faults start while the case's alert is being delivered: the receiver holds its answer
for a few seconds, so the fault falls between the send and the writing of its outcome.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from tests.alerts.receivers import HttpReceiver
from tests.faults.stack import Stack
from tests.processes import wait_for

# How long the receiver holds its answer to the case's first webhook, when asked to.
HOLD_ALERT_S = 4.0
ALERT_TIMEOUT_S = 120.0
# How long each fault lasts: long enough for the traffic to meet it many times over.
WORKER_DOWN_S = 3.0
POSTGRES_DOWN_S = 8.0
REDIS_DOWN_S = 6.0
READ_ONLY_S = 10.0
# A worker's statements of interest show up within this long under the case's traffic.
CATCH_TIMEOUT_S = 60.0
# Past this, any statement of the task will do rather than the preferred late ones.
PREFER_LATE_S = 30.0

# The drain's statements once it has claimed its batches, in its transaction's order.
DRAIN_ANY = ("ingest_span_rows", "FOR UPDATE SKIP LOCKED", 'DELETE FROM "ingest_rawbatch"')
# After the spans went into the span table and before the commit: the batches are
# still there, the spans already in; the worst moment to die.
DRAIN_LATE = (
    "INSERT INTO ingest_span (",
    "RESET enable_mergejoin",
    'DELETE FROM "ingest_rawbatch"',
)
FINALIZE_ANY = (
    "FROM ingest_span WHERE trace_pk = ANY",
    "analysis_stagesample",
    "UPDATE ingest_trace AS t",
)
# Samples written or traces marked final, the transaction not yet committed.
FINALIZE_LATE = ("COPY analysis_stagesample", "UPDATE ingest_trace AS t", "analysis_dirtybucket")


@dataclass(frozen=True)
class FaultWindow:
    """From the fault's start to its end (Unix seconds), and what was done."""

    started: float
    ended: float
    detail: str

    @property
    def duration(self) -> float:
        return self.ended - self.started


@dataclass(frozen=True)
class Target:
    """What a fault is injected into: the stack, and the receiver of the case's alerts."""

    stack: Stack
    receiver: HttpReceiver
    hook_path: str

    def webhook_arrived(self) -> bool:
        with self.receiver.lock:
            return any(r.path == self.hook_path for r in self.receiver.requests)

    def alert_in_flight(self) -> str:
        """Wait until the case's first webhook reached the receiver, which holds it."""
        if not wait_for(self.webhook_arrived, timeout=ALERT_TIMEOUT_S, interval=0.05):
            raise AssertionError(f"the alert did not fire:\n{self.stack.worker.tail()}")
        return ", the alert's webhook awaiting its answer"


Inject = Callable[[Target], FaultWindow]

_ACTIVITY = """
    SELECT pid, state, query FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
        AND backend_type = 'client backend' AND xact_start IS NOT NULL
        AND state IN ('active', 'idle in transaction')
"""


def _catch(stack: Stack, late: tuple[str, ...], any_: tuple[str, ...]) -> tuple[int, str]:
    """A worker backend inside the task's transaction at one of the statements."""
    started = time.monotonic()
    with stack.postgres.connect() as conn:
        while time.monotonic() - started < CATCH_TIMEOUT_S:
            wanted = late if time.monotonic() - started < PREFER_LATE_S else late + any_
            for pid, state, query in conn.execute(_ACTIVITY).fetchall():
                if any(fragment in query for fragment in wanted):
                    return pid, f"{state}: {' '.join(query.split())[:70]}"
            time.sleep(0.002)
    raise AssertionError(f"no worker was seen at {late + any_}:\n{stack.worker.tail()}")


def _backend_gone(stack: Stack, pid: int) -> bool:
    with stack.postgres.connect() as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return bool(row and row[0] == 0)


def _worker_killed_at(target: Target, late: tuple[str, ...], any_: tuple[str, ...]) -> FaultWindow:
    stack = target.stack
    pid, seen = _catch(stack, late, any_)
    started = time.time()
    stack.worker.kill()
    # The server rolls the task's transaction back once it sees the connection gone.
    assert wait_for(lambda: _backend_gone(stack, pid), timeout=30), (
        "the backend outlived its worker"
    )
    time.sleep(max(0.0, started + WORKER_DOWN_S - time.time()))
    ended = time.time()
    stack.worker_start()
    return FaultWindow(started, ended, f"worker SIGKILLed in its transaction at {seen!r}")


def worker_killed_mid_drain(target: Target) -> FaultWindow:
    return _worker_killed_at(target, DRAIN_LATE, DRAIN_ANY)


def worker_killed_mid_finalization(target: Target) -> FaultWindow:
    return _worker_killed_at(target, FINALIZE_LATE, FINALIZE_ANY)


def postgres_restarted(target: Target) -> FaultWindow:
    stack = target.stack
    during = target.alert_in_flight()
    started = time.time()
    # Immediate: every backend dies at once and the next start replays the WAL, as after
    # a crash; commits made without waiting for the WAL may be lost, and must be redone.
    stack.postgres.stop(mode="immediate")
    time.sleep(max(0.0, started + POSTGRES_DOWN_S - time.time()))
    stack.postgres.start()
    ended = time.time()
    return FaultWindow(
        started, ended, f"PostgreSQL stopped (immediate) for {ended - started:.1f} s{during}"
    )


def redis_restarted(target: Target) -> FaultWindow:
    stack = target.stack
    assert stack.redis is not None
    started = time.time()
    stack.redis.stop()
    time.sleep(max(0.0, started + REDIS_DOWN_S - time.time()))
    stack.redis.start()
    ended = time.time()
    return FaultWindow(
        started, ended, f"Redis stopped for {ended - started:.1f} s, restarted empty"
    )


def _read_only(conn: psycopg.Connection[object], on: bool) -> None:
    if on:
        conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
    else:
        conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
    conn.execute("SELECT pg_reload_conf()")


def database_read_only(target: Target) -> FaultWindow:
    """Every new transaction read-only, the app's open connections included (a reload
    reaches every session), as on a primary whose storage guard tripped or that was
    demoted; undone the same way."""
    during = target.alert_in_flight()
    with target.stack.postgres.connect() as conn:
        started = time.time()
        _read_only(conn, True)
        try:
            time.sleep(READ_ONLY_S)
        finally:
            _read_only(conn, False)
        ended = time.time()
    return FaultWindow(started, ended, f"writes refused for {ended - started:.1f} s{during}")
