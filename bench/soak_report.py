"""The soak benchmark's verdict: memory per process, backlog trends, the checks, the tables."""

from collections import Counter
from typing import Any

from bench.report import print_rows

# The project's own processes; PostgreSQL's backends come and go (CONN_MAX_AGE) and the
# Redis server and the load generators are not ours to judge, so they are only reported.
GATED_PREFIXES = ("web ", "celery ")
BACKLOG_SERIES = (
    "pending_spans", "open_traces", "oldest_open_trace_s", "queued_tasks",
    "notifications_pending", "dirty_buckets", "quarantined_traces",
)  # fmt: skip


def _mb(kb: float) -> float:
    return round(kb / 1024, 1)


def trend(points: list[tuple[float, float]]) -> float:
    """How much the least-squares line through ``points`` rises from first to last time:
    one burst does not make a trend, a steady climb does."""
    if len(points) < 3:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    slope = sum((t - mean_t) * (v - mean_v) for t, v in points) / spread if spread else 0.0
    return slope * (points[-1][0] - points[0][0])


def process_rows(samples: list[dict[str, Any]], warm_index: int, seen: dict[str, set[int]]) -> dict:
    """Per process: RSS at the first sample, after the warm-up, at the end and at most."""
    rows = {}
    roles = list(dict.fromkeys(role for s in samples for role in s["processes"]))
    for role in roles:
        series = [
            (i, s["processes"][role]) for i, s in enumerate(samples) if role in s["processes"]
        ]
        warm = next((p for i, p in series if i >= warm_index), series[-1][1])
        row = {
            "start_mb": _mb(series[0][1]["rss_kb"]),
            "warm_mb": _mb(warm["rss_kb"]),
            "end_mb": _mb(series[-1][1]["rss_kb"]),
            "max_mb": _mb(max(p["rss_kb"] for _, p in series)),
            "growth_pct": (
                round((series[-1][1]["rss_kb"] - warm["rss_kb"]) / warm["rss_kb"] * 100, 1)
                if warm["rss_kb"]
                else None
            ),
            "gated": role.startswith(GATED_PREFIXES),
            "processes": len(seen.get(role, ())) or None,
        }
        if role == "postgres backends":
            row["anon_start_mb"] = _mb(series[0][1]["anon_kb"])
            row["anon_end_mb"] = _mb(series[-1][1]["anon_kb"])
            row["anon_max_single_mb"] = _mb(max(p["max_anon_kb"] for _, p in series))
            row["backends_end"] = series[-1][1]["count"]
        rows[role] = row
    return rows


def backlog_rows(samples: list[dict[str, Any]], warm_index: int, after: dict) -> dict:
    rows = {}
    for name in BACKLOG_SERIES:
        values = [s["backlog"][name] for s in samples]
        steady = [(s["t_s"], s["backlog"][name]) for s in samples[warm_index:]]
        rows[name] = {
            "max": max(values),
            "at_end": values[-1],
            "after_drain": after[name],
            "trend": round(trend(steady), 1),
        }
    return rows


def http_totals(samples: list[dict[str, Any]], last: dict[str, Any]) -> dict[str, Any]:
    statuses: Counter[str] = Counter()
    for window in [s["http"] for s in samples] + [last]:
        statuses.update(window["statuses"])
    p95s = [s["http"]["p95_ms"] for s in samples if s["http"]["p95_ms"] is not None]
    return {
        "statuses": dict(sorted(statuses.items())),
        "window_p95_ms_first": p95s[1] if len(p95s) > 1 else None,
        "window_p95_ms_last": p95s[-1] if p95s else None,
        "window_p95_ms_max": max(p95s, default=None),
    }


def checks(
    *,
    processes: dict,
    backlog: dict,
    spans: dict,
    logs: dict,
    rate: float,
    rss_limit_pct: float,
    drained_s: float | None,
) -> dict[str, dict[str, Any]]:
    grew = {
        role: row["growth_pct"]
        for role, row in processes.items()
        if row["gated"] and row["growth_pct"] is not None and row["growth_pct"] > rss_limit_pct
    }
    # What "kept growing" means per series: ten more seconds of traffic waiting (spans,
    # or traces of about 12 spans, the simulator's mean), ten more seconds of age for the
    # oldest open trace, a queue or table that climbs instead of coming back down.
    limits = {
        "pending_spans": rate * 10, "open_traces": rate * 10 / 12, "oldest_open_trace_s": 10,
        "queued_tasks": 50, "notifications_pending": 5, "dirty_buckets": 100,
    }  # fmt: skip
    growing = {n: backlog[n]["trend"] for n, limit in limits.items() if backlog[n]["trend"] > limit}
    errors = sum(log["error_lines"] for log in logs.values())
    lost = spans["acknowledged"] - spans["stored"]
    return {
        "rss": {
            "ok": not grew,
            "detail": f"growth after the warm-up over {rss_limit_pct:g} %: {grew or 'none'}",
        },
        "backlog": {
            "ok": not growing and drained_s is not None,
            "detail": f"growing: {growing or 'none'}; "
            + (
                f"drained {drained_s:.0f} s after the load"
                if drained_s is not None
                else "not drained after the load"
            ),
        },
        "errors": {"ok": errors == 0, "detail": f"{errors} error lines in the logs"},
        "spans": {
            "ok": lost <= 0 and not spans["export_failed"] and not spans["dropped"],
            "detail": f"{max(lost, 0)} acknowledged spans not stored, "
            f"{spans['export_failed']} spans the exporters gave up on, "
            f"{spans['dropped']} dropped by the SDK's queue",
        },
    }


def print_report(result: dict[str, Any]) -> None:
    setup = result["setup"]
    print_rows(
        f"Soak: {setup['rate_spans_per_s']:,.0f} spans/s for {setup['minutes']:g} min, "
        f"RSS per process (growth from the end of the {setup['warmup_s']:.0f} s warm-up)",
        result["processes"],
        ["start_mb", "warm_mb", "end_mb", "max_mb", "growth_pct", "gated"],
    )
    pg = result["processes"].get("postgres backends")
    if pg:
        print(
            f"postgres backends: private memory {pg['anon_start_mb']} -> {pg['anon_end_mb']} MB "
            f"(largest backend {pg['anon_max_single_mb']} MB), {pg['backends_end']} at the end"
        )
    print_rows(
        "Backlog (trend: rise of the least-squares line after the warm-up)",
        result["backlog"],
        ["max", "at_end", "after_drain", "trend"],
    )
    spans, http = result["spans"], result["http"]
    print(
        f"\nspans planned {spans['planned']:,}, acknowledged {spans['acknowledged']:,}, "
        f"stored {spans['stored']:,}, export failures {spans['export_failed']:,}, "
        f"dropped before export {spans['dropped']:,}"
    )
    print(
        f"HTTP /v1/traces statuses {http['statuses']}; 30 s window p95 "
        f"{http['window_p95_ms_first']} ms first, {http['window_p95_ms_last']} ms last, "
        f"{http['window_p95_ms_max']} ms max"
    )
    print(f"webhooks received {result['alerts']['webhooks_received']}; {result['alerts']}")
    print(f"CPU cores busy after the warm-up: {result['cpu_cores']}")
    for name, log in result["logs"].items():
        print(f"{name}: {log['error_lines']} error lines, {log['warning_lines']} warnings")
        for line in log["first_errors"][:5]:
            print(f"    {line[:200]}")
    print()
    for name, check in result["checks"].items():
        print(f"{'ok  ' if check['ok'] else 'FAIL'} {name}: {check['detail']}")
