"""What the stack's database holds after a case, read with plain SQL.

The test process's Django connection points at the shared test database, so these
read the private server directly, through psycopg.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import psycopg

from apps.ingest.models import TraceState
from tests.faults.sender import SPANS_PER_TRACE, SpanKey

FINAL_STATES = (TraceState.FINALIZED, TraceState.SETTLED)
Connection = psycopg.Connection[Any]


def _hex(keys: Any, limit: int = 5) -> list[str]:
    return [k.hex() if isinstance(k, bytes) else "/".join(p.hex() for p in k) for k in keys][:limit]


@dataclass
class Storage:
    """Acknowledged spans against stored ones: lost, doubled, or stored unacknowledged."""

    acknowledged: int
    counted: int  # distinct (trace id, span id) stored for the team
    rows: int
    lost_count: int
    lost: list[str]  # the first few
    duplicates: int  # rows beyond the first of a (trace id, span id)
    unacknowledged: int  # stored, never acknowledged
    counters_off: list[str]  # traces whose span_count differs from their stored rows

    @property
    def exact(self) -> bool:
        return not (self.lost or self.duplicates or self.unacknowledged or self.counters_off)


def storage_check(conn: Connection, *, team_id: int, acked: set[SpanKey]) -> Storage:
    rows = conn.execute(
        "SELECT trace_id, span_id FROM ingest_span WHERE team_id = %s", [team_id]
    ).fetchall()
    stored = Counter((bytes(t), bytes(s)) for t, s in rows)
    counters = conn.execute(
        "SELECT t.trace_id, t.span_count, count(s.span_id) FROM ingest_trace AS t "
        "LEFT JOIN ingest_span AS s ON s.trace_pk = t.id "
        "WHERE t.team_id = %s GROUP BY t.id",
        [team_id],
    ).fetchall()
    return Storage(
        acknowledged=len(acked),
        counted=len(stored),
        rows=len(rows),
        lost_count=len(acked - stored.keys()),
        lost=_hex(sorted(acked - stored.keys())),
        duplicates=sum(n - 1 for n in stored.values()),
        unacknowledged=len(stored.keys() - acked),
        counters_off=_hex(bytes(t) for t, counted, real in counters if counted != real),
    )


@dataclass
class Analysis:
    """Traces acknowledged whole against their analysis: final, routed, sampled once."""

    traces: int
    final: int
    not_final: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    unrouted: list[str] = field(default_factory=list)
    samples_missing: int = 0
    samples_doubled: int = 0

    @property
    def complete(self) -> bool:
        return not (
            self.not_final
            or self.incomplete
            or self.unrouted
            or self.samples_missing
            or self.samples_doubled
        )


def analysis_check(
    conn: Connection, *, team_id: int, pipeline_id: int, stage_ids: list[int], traces: set[bytes]
) -> Analysis:
    rows = conn.execute(
        "SELECT id, trace_id, state, pipeline_id, incomplete, span_count FROM ingest_trace "
        "WHERE team_id = %s",
        [team_id],
    ).fetchall()
    by_id = {
        bytes(trace_id): (pk, state, pipeline, incomplete, count)
        for pk, trace_id, state, pipeline, incomplete, count in rows
    }
    samples = Counter(
        (trace_pk, stage_id)
        for trace_pk, stage_id in conn.execute(
            "SELECT trace_pk, stage_id FROM analysis_stagesample WHERE team_id = %s", [team_id]
        ).fetchall()
    )
    report = Analysis(traces=len(traces), final=0)
    for trace_id in sorted(traces):
        found = by_id.get(trace_id)
        if found is None or found[1] not in FINAL_STATES:
            report.not_final.append(trace_id.hex())
            continue
        pk, _, pipeline, incomplete, count = found
        report.final += 1
        if incomplete or count != SPANS_PER_TRACE:
            report.incomplete.append(trace_id.hex())
        if pipeline != pipeline_id:
            report.unrouted.append(trace_id.hex())
        for stage_id in stage_ids:
            seen = samples.get((pk, stage_id), 0)
            report.samples_missing += seen == 0
            report.samples_doubled += max(0, seen - 1)
    report.not_final = report.not_final[:5]
    report.incomplete = report.incomplete[:5]
    report.unrouted = report.unrouted[:5]
    return report


def traces_settled(conn: Connection, *, team_id: int, stage_count: int, traces: set[bytes]) -> bool:
    """Every one of ``traces`` final, with a sample per stage: analysis has caught up."""
    final, samples = conn.execute(
        "SELECT (SELECT count(*) FROM ingest_trace WHERE team_id = %s AND state = ANY(%s) "
        "AND trace_id = ANY(%s)), "
        "(SELECT count(*) FROM analysis_stagesample WHERE team_id = %s)",
        [team_id, [int(s) for s in FINAL_STATES], list(traces), team_id],
    ).fetchone() or (0, 0)
    return bool(final == len(traces) and samples >= stage_count * len(traces))


@dataclass
class Leftovers:
    """Work a fault may have left stuck: the raw batches, quarantine entries and
    notifications of every team, the traces of the case's team."""

    raw_batches: int
    raw_batches_set_aside: int
    open_traces_overdue: int
    quarantined_traces: int
    quarantine_entries: int
    notifications_pending: int


def leftovers(conn: Connection, *, team_id: int, overdue_s: float) -> Leftovers:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM ingest_rawbatch), "
        "(SELECT count(*) FROM ingest_rawbatch WHERE last_error <> ''), "
        "(SELECT count(*) FROM ingest_trace WHERE team_id = %s AND state = %s "
        "   AND last_span_at < now() - make_interval(secs => %s)), "
        "(SELECT count(*) FROM ingest_trace WHERE team_id = %s AND state = %s), "
        "(SELECT count(*) FROM core_quarantineditem), "
        "(SELECT count(*) FROM alerts_notification WHERE status = 'pending')",
        [team_id, int(TraceState.OPEN), overdue_s, team_id, int(TraceState.QUARANTINED)],
    ).fetchone()
    assert row is not None
    return Leftovers(*row)


def raw_backlog_oldest(conn: Connection) -> float | None:
    """When the oldest pending raw batch was received (Unix seconds); None when none is."""
    row = conn.execute(
        "SELECT extract(epoch FROM min(received_at)) FROM ingest_rawbatch"
    ).fetchone()
    return float(row[0]) if row and row[0] is not None else None


def last_finalized(conn: Connection, *, team_id: int, traces: set[bytes]) -> float | None:
    row = conn.execute(
        "SELECT extract(epoch FROM max(finalized_at)) FROM ingest_trace "
        "WHERE team_id = %s AND trace_id = ANY(%s)",
        [team_id, list(traces)],
    ).fetchone()
    return float(row[0]) if row and row[0] is not None else None


@dataclass
class NotificationRow:
    incident_id: int
    event: str
    status: str
    attempts: int
    attempt_rows: int


def notifications(conn: Connection, *, team_id: int) -> list[NotificationRow]:
    rows = conn.execute(
        "SELECT n.incident_id, n.event, n.status, n.attempts, count(a.id) "
        "FROM alerts_notification AS n LEFT JOIN alerts_deliveryattempt AS a "
        "ON a.notification_id = n.id WHERE n.team_id = %s GROUP BY n.id ORDER BY n.id",
        [team_id],
    ).fetchall()
    return [NotificationRow(*row) for row in rows]
