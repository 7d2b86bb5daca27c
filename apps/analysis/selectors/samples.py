"""Stage samples as examples: the slowest traces of a stage over a window."""

from dataclasses import dataclass

from apps.analysis.models import StageSample
from apps.core.time import NS_PER_MS, NS_PER_S
from apps.ingest.models import Trace


@dataclass(frozen=True)
class SlowSample:
    trace_hex: str
    start_ns: int
    wall_ms: float
    critical_ms: float
    error: bool
    e2e_ms: float | None


def slowest_samples(
    *, pipeline_id: int, stage_id: int, start: int, end: int, limit: int = 10
) -> list[SlowSample]:
    """The stage's ``limit`` slowest samples (wall time) among traces started in
    ``[start, end)`` (epoch seconds), slowest first, with their traces' ids."""
    samples = list(
        StageSample.objects.filter(
            pipeline_id=pipeline_id,
            stage_id=stage_id,
            start_ns__gte=start * NS_PER_S,
            start_ns__lt=end * NS_PER_S,
        )
        .order_by("-wall_ns", "trace_pk")
        .values_list("trace_pk", "start_ns", "wall_ns", "critical_ns", "error")[:limit]
    )
    traces = {
        pk: (bytes(trace_id).hex(), start_ns, end_ns)
        for pk, trace_id, start_ns, end_ns in Trace.objects.filter(
            pk__in=[s[0] for s in samples]
        ).values_list("pk", "trace_id", "start_ns", "end_ns")
    }
    result = []
    for trace_pk, start_ns, wall_ns, critical_ns, error in samples:
        if trace_pk not in traces:
            continue  # the trace row expired before its samples
        trace_hex, trace_start, trace_end = traces[trace_pk]
        e2e = (trace_end - trace_start) / NS_PER_MS if trace_end and trace_start else None
        result.append(
            SlowSample(
                trace_hex, start_ns, wall_ns / NS_PER_MS, critical_ns / NS_PER_MS, error, e2e
            )
        )
    return result
