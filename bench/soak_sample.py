"""What the soak benchmark reads every sample: memory, backlog, HTTP statuses, log errors.

Memory comes from ``/proc/<pid>/status``, which any user may read: ``VmRSS`` and, for
PostgreSQL, ``RssAnon`` too. A backend's RSS grows as it touches shared buffers, which
are not its own; its private (anonymous) memory is what a leak would grow.
"""

import os
import re
import statistics
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.db.models import Min, Sum

from bench.report import percentile
from bench.soak_load import LoadProcess
from bench.soak_stack import Stack

QUEUES = ("ingest", "rollup", "alerts")
# kombu's Redis transport keeps a queue's prioritised messages under these suffixes.
PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")
ERROR_LINE = re.compile(r"ERROR|Traceback|CRITICAL")
# A level as the loggers print it ("WARNING", "[WARNING]", "WARNING/ForkPoolWorker-1"),
# not the word in celery's banner ("logfile -> [stderr]@%WARNING").
WARNING_LINE = re.compile(r"(^|[ \[])WARNING([\] /:]|$)")


def _memory_kb(pid: int) -> dict[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None  # ended meanwhile
    found = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {
        "rss_kb": int(found.get("VmRSS", "0 kB").split()[0]),
        "anon_kb": int(found.get("RssAnon", "0 kB").split()[0]),
    }


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    return children


def backlog(broker: redis.Redis) -> dict[str, Any]:
    """Work accepted and not yet done, and the spans stored so far."""
    from apps.alerts.models import Notification, NotificationStatus
    from apps.analysis.models import DirtyBucket
    from apps.ingest.models import RawBatch, Span, Trace, TraceState

    open_traces = Trace.objects.filter(state=TraceState.OPEN)
    # Only a trace holding its root is waiting for analysis; one whose root never came
    # (dropped by an exporter) waits for TRACE_MAX_WAIT_SECONDS by design.
    waiting = open_traces.filter(root_span_id__isnull=False)
    oldest = waiting.aggregate(oldest=Min("last_span_at"))["oldest"]
    queued = sum(broker.llen(q + suffix) for q in QUEUES for suffix in PRIORITY_SUFFIXES)
    return {
        "pending_spans": int(RawBatch.objects.aggregate(n=Sum("span_count"))["n"] or 0),
        "open_traces": open_traces.count(),
        "oldest_open_trace_s": (
            round((datetime.now(UTC) - oldest).total_seconds(), 1) if oldest else 0.0
        ),
        "quarantined_traces": Trace.objects.filter(state=TraceState.QUARANTINED).count(),
        "dirty_buckets": DirtyBucket.objects.count(),
        "notifications_pending": Notification.objects.filter(
            status=NotificationStatus.PENDING
        ).count(),
        "queued_tasks": queued,
        "stored_spans": Span.objects.count(),
    }


class Sampler:
    """One call of ``sample`` reads everything; processes are named by role and slot."""

    def __init__(self, stack: Stack, loads: list[LoadProcess]) -> None:
        self.stack, self.loads = stack, loads
        self.broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        self.pids_seen: dict[str, set[int]] = {}
        self.access_offset = 0

    def _processes(self) -> dict[str, dict[str, Any]]:
        children = _children()
        pids = self.stack.pids
        named: list[tuple[str, int]] = [("web master", pids["web"])]
        web_workers = sorted(children.get(pids["web"], []))
        named += [(f"web worker {i + 1}", pid) for i, pid in enumerate(web_workers)]
        named.append(("celery worker", pids["worker"]))
        pool = sorted(children.get(pids["worker"], []))
        named += [(f"celery pool {i + 1}", pid) for i, pid in enumerate(pool)]
        named.append(("celery beat", pids["beat"]))
        named += [(f"load generator {i + 1}", load.proc.pid) for i, load in enumerate(self.loads)]
        rows = {}
        for role, pid in named:
            memory = _memory_kb(pid)
            if memory is not None:
                self.pids_seen.setdefault(role, set()).add(pid)
                rows[role] = {"pid": pid, **memory}
        rows["postgres backends"] = self._postgres()
        rows["redis server"] = self._redis()
        return rows

    def _postgres(self) -> dict[str, Any]:
        """The backends serving the benchmark's database, but the sampler's own."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            backends = [
                memory for (pid,) in cursor.fetchall() if (memory := _memory_kb(pid)) is not None
            ]
        return {
            "count": len(backends),
            "rss_kb": sum(b["rss_kb"] for b in backends),
            "anon_kb": sum(b["anon_kb"] for b in backends),
            "max_anon_kb": max((b["anon_kb"] for b in backends), default=0),
        }

    def _redis(self) -> dict[str, Any]:
        info = self.broker.info("memory")
        return {
            "rss_kb": int(info["used_memory_rss"]) // 1024,
            "used_kb": int(info["used_memory"]) // 1024,
        }

    def _http(self) -> dict[str, Any]:
        """Status counts and request times of the OTLP requests logged since the last read."""
        statuses: Counter[str] = Counter()
        times_ms = []
        with self.stack.access_log.open("rb") as log:
            log.seek(self.access_offset)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.access_offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            status, ms, path = [*line.split(), "", "", ""][:3]  # the time follows
            if path == "/v1/traces":
                statuses[status] += 1
                times_ms.append(float(ms))
        return {
            "statuses": dict(statuses),
            "p50_ms": round(statistics.median(times_ms), 1) if times_ms else None,
            "p95_ms": round(percentile(times_ms, 95), 1) if times_ms else None,
        }

    def sample(self, at_s: float, loads: dict[str, int]) -> dict[str, Any]:
        return {
            "t_s": round(at_s, 1),
            "processes": self._processes(),
            "backlog": backlog(self.broker),
            "http": self._http(),
            "load": loads,
        }


def log_lines(logs: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per log, the lines naming an error (``ERROR``, ``Traceback``, ``CRITICAL``), the
    first of them, and how many lines are warnings."""
    found = {}
    for name in names:
        path = logs / name
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        errors = [line for line in lines if ERROR_LINE.search(line)]
        found[name] = {
            "error_lines": len(errors),
            "warning_lines": sum(1 for line in lines if WARNING_LINE.search(line)),
            "first_errors": errors[:20],
        }
    return found
