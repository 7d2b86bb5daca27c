"""One fault case from start to end: a team, traffic, the fault, recovery, the figures.

The case's traffic runs until requests have succeeded again for a while after the
fault; then no new spans are made, every refused batch is sent until acknowledged,
and the case waits for the stack to settle: raw batches drained, every trace analyzed,
the alert delivered. What it measured is returned for the tests to judge and for
``docs/reliability.md``.
"""

import json
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.alerts.receivers import HttpReceiver, Reply
from tests.faults import checks
from tests.faults.faults import HOLD_ALERT_S, FaultWindow, Inject, Target
from tests.faults.sender import Attempt, KnownTotalsClient
from tests.faults.stack import TRACE_IDLE_SECONDS, Stack, World
from tests.processes import wait_for

# Spans stored before the fault, so that it meets a worker in full flow.
WARM_SPANS = 600
# Batches acknowledged after the fault's end before the traffic stops.
AFTER_ACKS = 40
# Generous: the machine's two cores are shared with other test runs.
RECOVERY_TIMEOUT_S = 150.0
SETTLE_TIMEOUT_S = 180.0
# A copy of a webhook would follow its first within this long (the task is redelivered
# or swept again); there is no event to wait for when nothing more comes.
DUPLICATE_GRACE_S = 3.0
OVERDUE_S = TRACE_IDLE_SECONDS + 30.0


class BacklogWatch:
    """The oldest pending raw batch, sampled every 0.2 s while the case runs."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.samples: list[tuple[float, float | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "BacklogWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self._stop.wait(0.2):
            try:
                if conn is None:
                    conn = self.stack.postgres.connect(connect_timeout=1)
                self.samples.append((time.time(), checks.raw_backlog_oldest(conn)))
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn = None  # the server is away: try again next time
        if conn is not None:
            conn.close()

    def drained_after(self, moment: float) -> float | None:
        """Seconds after ``moment`` until no batch received before it was pending."""
        for at, oldest in self.samples:
            if at >= moment and (oldest is None or oldest > moment):
                return round(at - moment, 2)
        return None


@dataclass
class CaseResult:
    key: str
    name: str
    fault: str
    world: World
    fault_duration_s: float
    offered_spans_per_s: float
    requests: int
    answers: dict[str, int]  # by HTTP status, "none" when no answer came
    refusals_with_retry_after: int
    refusals_without_retry_after: int
    answers_during_fault: dict[str, int]
    unanswered: list[str]  # the first few requests that got no answer: when, and why
    first_2xx_after_s: float | None
    last_refusal_after_s: float | None
    backlog_drained_after_s: float | None
    analysis_caught_up_after_s: float | None
    all_acknowledged: bool
    settled: bool
    storage: checks.Storage
    analysis: checks.Analysis
    leftovers: checks.Leftovers
    quarantine_entries_before: int
    notifications: list[checks.NotificationRow]
    webhooks: list[tuple[int, str, str]]  # (incident id, event type, webhook-id)
    process_exits: list[str]  # processes that exited on their own and were restarted
    case_seconds: float
    logs: str = field(default="", repr=False)

    @property
    def refusals(self) -> int:
        return self.refusals_with_retry_after + self.refusals_without_retry_after

    def figures(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("logs")
        data.pop("world")
        return data


def _answers(attempts: list[Attempt]) -> dict[str, int]:
    return dict(sorted(Counter(str(a.status or "none") for a in attempts).items()))


def _webhooks(receiver: HttpReceiver, path: str) -> list[tuple[int, str, str]]:
    with receiver.lock:
        received = [r for r in receiver.requests if r.path == path]
    out = []
    for request in received:
        body = json.loads(request.body)
        incident = (body.get("incident") or {}).get("id", 0)
        out.append((int(incident), str(body.get("type")), request.headers.get("webhook-id", "")))
    return out


def case_run(
    stack: Stack,
    receiver: HttpReceiver,
    *,
    key: str,
    name: str,
    inject: Inject,
    hold_alert: bool = False,
) -> CaseResult:
    """``hold_alert``: the receiver holds its answer to the case's first webhook a while
    (the earlier cases' rules are disabled, so that webhook is this case's)."""
    begun, begun_at = time.monotonic(), time.time()
    path = f"/hook/{key}"
    world = stack.world_create(f"faults-{key}", receiver.url(path))
    if hold_alert:
        receiver.script(Reply(delay_s=HOLD_ALERT_S))
    stages = list(world.stage_ids.values())
    with stack.postgres.connect() as conn:
        quarantine_before = checks.leftovers(
            conn, team_id=world.team_id, overdue_s=OVERDUE_S
        ).quarantine_entries
    watch = BacklogWatch(stack).start()
    client = KnownTotalsClient(host="127.0.0.1", port=stack.web_port, token=world.token).start()

    def stored() -> int:
        with stack.postgres.connect() as conn:
            row = conn.execute(
                "SELECT count(*) FROM ingest_span WHERE team_id = %s", [world.team_id]
            ).fetchone()
        return int(row[0]) if row else 0

    def settled() -> bool:
        traces = client.completed_traces()
        with stack.postgres.connect() as conn:
            left = checks.leftovers(conn, team_id=world.team_id, overdue_s=OVERDUE_S)
            analyzed = checks.traces_settled(
                conn, team_id=world.team_id, stage_count=len(stages), traces=traces
            )
        fired = any(event == "alert.firing" for _, event, _ in _webhooks(receiver, path))
        return analyzed and left.raw_batches == 0 and left.notifications_pending == 0 and fired

    try:
        if not wait_for(lambda: stored() >= WARM_SPANS, timeout=RECOVERY_TIMEOUT_S, interval=0.3):
            raise AssertionError(f"no spans stored before the fault:\n{stack.logs_tail()}")
        window: FaultWindow = inject(Target(stack, receiver, path))
        recovered = wait_for(
            lambda: client.acked_count(sent_after=window.ended) >= AFTER_ACKS,
            timeout=RECOVERY_TIMEOUT_S,
            interval=0.2,
        )
        if not recovered:
            raise AssertionError(f"requests did not succeed again:\n{stack.logs_tail()}")
        client.stop_new()
        all_acked = client.finish(timeout=RECOVERY_TIMEOUT_S)
        is_settled = wait_for(settled, timeout=SETTLE_TIMEOUT_S, interval=0.5)
        time.sleep(DUPLICATE_GRACE_S)
    finally:
        client.close()
        watch.stop()
        with receiver.lock:
            receiver.replies.clear()
        # Done with this team, whatever happened: its rule stays quiet in the next cases.
        with stack.postgres.connect() as conn:
            conn.execute(
                "UPDATE alerts_alertrule SET enabled = false WHERE id = %s", [world.rule_id]
            )

    batches, attempts = client.snapshot()
    acked = client.acknowledged_spans()
    traces = client.completed_traces()
    during = [a for a in attempts if window.started <= a.sent_at <= window.ended]
    refused = [a for a in attempts if not a.acknowledged]
    after = [a.answered_at for a in attempts if a.acknowledged and a.sent_at >= window.ended]
    last_refusal = max((a.answered_at for a in refused), default=None)
    before_end = client.completed_traces(by=window.ended)
    with stack.postgres.connect() as conn:
        last_final = checks.last_finalized(conn, team_id=world.team_id, traces=before_end)
        result = CaseResult(
            key=key,
            name=name,
            fault=window.detail,
            world=world,
            fault_duration_s=round(window.duration, 2),
            offered_spans_per_s=round(
                client.created_spans(since=window.started, until=window.ended)
                / max(window.duration, 1e-6),
                1,
            ),
            requests=len(attempts),
            answers=_answers(attempts),
            refusals_with_retry_after=sum(1 for a in refused if a.retry_after),
            refusals_without_retry_after=sum(1 for a in refused if not a.retry_after),
            answers_during_fault=_answers(during),
            unanswered=[
                f"{a.sent_at - window.ended:+.2f} s after the fault's end: {a.error}"
                for a in attempts
                if a.status is None
            ][:5],
            first_2xx_after_s=round(min(after) - window.ended, 2) if after else None,
            last_refusal_after_s=(
                round(last_refusal - window.ended, 2) if last_refusal is not None else None
            ),
            backlog_drained_after_s=watch.drained_after(window.ended),
            analysis_caught_up_after_s=(
                round(last_final - window.ended, 2) if last_final is not None else None
            ),
            all_acknowledged=all_acked and all(b.acked for b in batches),
            settled=is_settled,
            storage=checks.storage_check(conn, team_id=world.team_id, acked=acked),
            analysis=checks.analysis_check(
                conn,
                team_id=world.team_id,
                pipeline_id=world.pipeline_id,
                stage_ids=stages,
                traces=traces,
            ),
            leftovers=checks.leftovers(conn, team_id=world.team_id, overdue_s=OVERDUE_S),
            quarantine_entries_before=quarantine_before,
            notifications=checks.notifications(conn, team_id=world.team_id),
            webhooks=_webhooks(receiver, path),
            process_exits=stack.supervisor.exits_since(begun_at),
            case_seconds=round(time.monotonic() - begun, 1),
            logs=stack.logs_tail() if not is_settled else "",
        )
    return result


def results_write(path: Path, result: CaseResult) -> None:
    """Merge one case's figures into the JSON file the reliability table is made from."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[result.key] = result.figures()
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
