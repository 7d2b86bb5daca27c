"""Latency sketch: add cost, stored size, merge and quantile cost, measured accuracy.

Minute buckets hold lognormal latencies (median 250 ms, sigma 0.5, a typical
model-backed stage; sigma 1.0 for a wide one). The reference is the ``ddsketch``
package (same mapping, pure-Python ``add``, protobuf serialization without
min/max/sum). Accuracy: random windows over bucketed lognormal, Pareto and
bimodal samples, p50/p90/p95/p99 of the merged window against the exact
nearest-rank percentile of its raw samples. One core.
"""

import math
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from ddsketch import DDSketch
from ddsketch.pb import ddsketch_pb2
from ddsketch.pb.proto import DDSketchProto

from apps.rollups.sketches.ddsketch import Rule, Sketch
from apps.rollups.sketches.merge_batch import merged_from_bytes
from bench.report import percentile, print_rows, write

QS = (0.5, 0.9, 0.95, 0.99)
MINUTES_PER_DAY = 1440
ACCURACY_WINDOWS = 3000


def _minute(rng: np.random.Generator, count: int, sigma: float = 0.5) -> np.ndarray:
    return rng.lognormal(math.log(250), sigma, count)


def _seconds_per_call(action: Callable[[], object], number: int, repeat: int = 7) -> float:
    action()
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            action()
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def _add_rows(rng: np.random.Generator) -> dict[str, dict[str, Any]]:
    rows = {}
    for count, number in ((10, 2000), (100, 2000), (1000, 500), (1_000_000, 3)):
        values = _minute(rng, count)
        seconds = _seconds_per_call(partial(Sketch.from_values, values), number)
        rows[f"add {count:,} values, vectorized"] = {
            "ns_per_value": round(seconds / count * 1e9, 1),
            "us_per_call": round(seconds * 1e6, 1),
        }
    values = _minute(rng, 100_000).tolist()

    def reference_add() -> None:
        reference = DDSketch(0.01)
        for v in values:
            reference.add(v)

    seconds = _seconds_per_call(reference_add, 1, repeat=3)
    rows["add 100,000 values, ddsketch add"] = {
        "ns_per_value": round(seconds / len(values) * 1e9, 1),
        "us_per_call": round(seconds * 1e6, 1),
    }
    return rows


def _reference_bytes(values: np.ndarray) -> bytes:
    reference = DDSketch(0.01)
    for v in values.tolist():
        reference.add(v)
    return bytes(DDSketchProto.to_proto(reference).SerializeToString())


def _size_rows(rng: np.random.Generator) -> dict[str, dict[str, Any]]:
    rows = {}
    for sigma in (0.5, 1.0):
        for count in (10, 100, 1000):
            samples = [_minute(rng, count, sigma) for _ in range(200)]
            sizes = [float(len(Sketch.from_values(s).to_bytes())) for s in samples]
            rows[f"minute of {count:,} values, sigma {sigma}"] = {
                "bytes_mean": round(statistics.fmean(sizes), 1),
                "bytes_p95": percentile(sizes, 95),
                "bytes_max": max(sizes),
                "ddsketch_pb_bytes": round(
                    statistics.fmean(len(_reference_bytes(s)) for s in samples[:20]), 1
                ),
            }
    day = [_minute(rng, 100) for _ in range(MINUTES_PER_DAY)]
    day_bytes = float(len(Sketch.merged(Sketch.from_values(m) for m in day).to_bytes()))
    rows["day of 144,000 values, sigma 0.5"] = {
        "bytes_mean": day_bytes,
        "bytes_p95": day_bytes,
        "bytes_max": day_bytes,
        "ddsketch_pb_bytes": len(_reference_bytes(np.concatenate(day))),
    }
    return rows


def _operation_rows(rng: np.random.Generator) -> dict[str, dict[str, Any]]:
    minutes = [Sketch.from_values(_minute(rng, 100)) for _ in range(MINUTES_PER_DAY)]
    stored = [m.to_bytes() for m in minutes]
    reference = _reference_bytes(_minute(rng, 100))
    day = Sketch.merged(minutes)

    def reference_decode() -> None:
        message = ddsketch_pb2.DDSketch()
        message.ParseFromString(reference)
        DDSketchProto.from_proto(message)

    timings = {
        "encode a minute sketch (100 values)": (lambda: minutes[0].to_bytes(), 2000),
        "decode a minute sketch (100 values)": (lambda: Sketch.from_bytes(stored[0]), 2000),
        "decode a minute sketch, ddsketch protobuf": (reference_decode, 200),
        "merge 1,440 minute sketches into a day": (lambda: Sketch.merged(minutes), 20),
        "decode and merge 1,440 stored minute sketches": (
            lambda: Sketch.merged(Sketch.from_bytes(b) for b in stored),
            5,
        ),
        "decode and merge 1,440 stored minute sketches, batch": (
            lambda: merged_from_bytes(stored),
            20,
        ),
        "merge one minute into a sketch in place": (lambda: day.copy().merge(minutes[0]), 2000),
        "p50/p90/p95/p99 of a day sketch": (lambda: day.quantiles(QS), 2000),
    }
    return {
        name: {"us_per_op": round(_seconds_per_call(action, number) * 1e6, 1)}
        for name, (action, number) in timings.items()
    }


def _window_samples(rng: np.random.Generator) -> tuple[list[np.ndarray], int, int]:
    n = int(rng.integers(1, 5000))
    shape = rng.integers(3)
    if shape == 0:
        samples = rng.lognormal(math.log(rng.uniform(1, 3000)), rng.uniform(0.05, 2.5), n)
    elif shape == 1:
        samples = (rng.pareto(rng.uniform(1.05, 3), n) + 1) * rng.uniform(1, 500)
    else:
        fast = rng.lognormal(math.log(rng.uniform(1, 50)), 0.3, n)
        slow = rng.lognormal(math.log(rng.uniform(100, 5000)), 0.4, n)
        samples = np.where(rng.random(n) < rng.uniform(0.05, 0.95), fast, slow)
    samples = np.minimum(samples, 3_600_000.0)
    buckets = np.split(samples, np.sort(rng.integers(0, n + 1, int(rng.integers(0, 60)))))
    first = int(rng.integers(len(buckets)))
    return buckets, first, int(rng.integers(first, len(buckets)))


def _accuracy_rows(rng: np.random.Generator) -> dict[str, dict[str, Any]]:
    errors: dict[Rule, list[float]] = {"nearest": [], "ddsketch": []}
    for _ in range(ACCURACY_WINDOWS):
        buckets, first, last = _window_samples(rng)
        window = [Sketch.from_bytes(Sketch.from_values(b).to_bytes()) for b in buckets]
        merged = Sketch.merged(window[first : last + 1])
        raw = np.sort(np.concatenate(buckets[first : last + 1]))
        if not len(raw):
            continue
        exact = [float(raw[max(1, math.ceil(round(q * len(raw), 9))) - 1]) for q in QS]
        for rule, found in errors.items():
            estimates = merged.quantiles(QS, rule=rule)
            found += [
                abs(e - x) / x for e, x in zip(estimates, exact, strict=True) if e is not None
            ]
    return {
        f"{rule} rank vs exact nearest rank": {
            "windows": ACCURACY_WINDOWS,
            "max_rel_error_pct": round(max(found) * 100, 4),
            "p99_rel_error_pct": round(percentile(found, 99) * 100, 4),
            "mean_rel_error_pct": round(statistics.fmean(found) * 100, 4),
        }
        for rule, found in errors.items()
    }


def run() -> None:
    rng = np.random.default_rng(1440)
    tables = [
        ("Adding values (one call per batch)", _add_rows(rng), ["ns_per_value", "us_per_call"]),
        (
            "Stored bytes per sketch (ours: sparse, with min/max/sum)",
            _size_rows(rng),
            ["bytes_mean", "bytes_p95", "bytes_max", "ddsketch_pb_bytes"],
        ),
        ("Operations", _operation_rows(rng), ["us_per_op"]),
        (
            "Percentile error of merged windows, p50/p90/p95/p99",
            _accuracy_rows(rng),
            ["windows", "max_rel_error_pct", "p99_rel_error_pct", "mean_rel_error_pct"],
        ),
    ]
    rows: dict[str, dict[str, Any]] = {}
    for title, table, columns in tables:
        print_rows(title, table, columns)
        rows.update(table)
    path = write(
        "sketch",
        rows,
        {"relative_accuracy": 0.01, "minute": "lognormal, median 250 ms", "quantiles": QS},
    )
    print(f"\nwritten {path}")
