"""Realistic RAG-chat traces, sent through the OpenTelemetry SDK like a real service would.

A trace is first planned as spans with offsets from the request's start (``plan``),
then replayed into a tracer with explicit start and end times (``send``). Nothing
sleeps inside a span, so a single process can produce hundreds of traces per second;
only the pacing between traces follows the wall clock.
"""

from apps.demo.traffic.send import (
    CountingExporter,
    drain,
    emit_trace,
    otlp_provider,
    run_paced,
)
from apps.demo.traffic.traffic_plan import (
    Drift,
    Profile,
    Switches,
    TracePlanner,
    TraceShape,
    shape_for_pipeline,
)

__all__ = [
    "CountingExporter",
    "Drift",
    "Profile",
    "Switches",
    "TracePlanner",
    "TraceShape",
    "drain",
    "emit_trace",
    "otlp_provider",
    "run_paced",
    "shape_for_pipeline",
]
