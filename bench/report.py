import json
import platform
import statistics
from pathlib import Path
from typing import Any

from django.db import connection

RESULTS = Path(__file__).resolve().parent / "results"


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of the measured values."""
    ordered = sorted(values)
    rank = max(1, round(p / 100 * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def summarise(samples_ms: list[float]) -> dict[str, float]:
    return {
        "n": len(samples_ms),
        "mean_ms": round(statistics.fmean(samples_ms), 2),
        "p50_ms": round(percentile(samples_ms, 50), 2),
        "p95_ms": round(percentile(samples_ms, 95), 2),
        "max_ms": round(max(samples_ms), 2),
    }


def _server_version() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        (version,) = cursor.fetchone()
    return str(version)


def write(name: str, rows: dict[str, dict[str, Any]], setup: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "database": f"PostgreSQL {_server_version()}",
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.system()}",
        "setup": setup,
        "results": rows,
    }
    path.write_text(json.dumps(payload, indent=2))
    return path


def print_table(title: str, rows: dict[str, dict[str, Any]]) -> None:
    columns = ["n", "mean_ms", "p50_ms", "p95_ms", "max_ms"]
    width = max(len(name) for name in rows) + 2
    print(f"\n{title}")
    print("".ljust(width) + "".join(c.rjust(10) for c in columns))
    for name, row in rows.items():
        print(name.ljust(width) + "".join(str(row[c]).rjust(10) for c in columns))


def print_rows(title: str, rows: dict[str, dict[str, Any]], columns: list[str]) -> None:
    """Like print_table, for rows with other columns than latency samples."""
    width = max(len(name) for name in rows) + 2
    column_width = max(10, *(len(c) + 2 for c in columns))
    print(f"\n{title}")
    print("".ljust(width) + "".join(c.rjust(column_width) for c in columns))
    for name, row in rows.items():
        print(name.ljust(width) + "".join(str(row.get(c, "")).rjust(column_width) for c in columns))
