"""The traces a what-if replays: a reproducible sample of a pipeline's window, modelled.

The sample is the traces with the smallest hash of their trace id among the window's
analyzed, complete traces: the same window gives the same traces on every run, and
any size of it is a uniform draw, whatever the order the traces arrived in.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from apps.analysis.critical_path import find_root
from apps.analysis.pipeline_routing import compile_pipeline
from apps.analysis.span_projection import span_projection
from apps.analysis.spans import unique_spans
from apps.analysis.stage_inheritance import trace_matches
from apps.analysis.stage_matching import StageMatcher
from apps.analysis.stored_spans import spans_read
from apps.core.time import NS_PER_S
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.selectors import pipeline_with_stages
from apps.whatif.dependency import ModelRows, model_add_trace, stage_index
from apps.whatif.replay import ReplayModel, replay_model

DEFAULT_TRACES = 2000
MAX_TRACES = 20_000
# Spans, and bytes of them as read (see ``spans_read``), loaded per batch of traces: a
# bounded piece of memory however large a trace is. A trace heavier than a batch may
# hold ends the sample there, as the byte budget does.
LOAD_BATCH_SPANS = 50_000
LOAD_BATCH_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class TraceSample:
    pipeline: Pipeline
    stages: list[Stage]
    start: int  # epoch seconds, the window asked for
    end: int
    in_window: int  # analyzed complete traces in the window
    left_out: int  # sampled traces past the span or byte budget of one replay
    left_out_by: str  # "spans" or "bytes": the budget that left them out; "" if none
    spans: int  # spans read
    bytes_read: int  # of span skeletons and the attributes the rules compare
    errors: int  # modelled traces with an error
    model: ReplayModel

    @property
    def traces(self) -> int:
        return self.model.trace_count


def _window_traces(pipeline: Pipeline, start: int, end: int) -> QuerySet[Trace]:
    return Trace.objects.filter(
        team_id=pipeline.team_id,
        pipeline=pipeline,
        start_ns__gte=start * NS_PER_S,
        start_ns__lt=end * NS_PER_S,
        state__in=ANALYZED_STATES,
        incomplete=False,
    )


def trace_sample(
    *, pipeline: Pipeline, start: int, end: int, size: int = DEFAULT_TRACES
) -> TraceSample:
    """Up to ``size`` traces of ``[start, end)`` (epoch seconds), modelled for replay.

    A sample holds at most ``WHATIF_MAX_SPANS`` spans and reads at most
    ``WHATIF_MAX_BYTES`` of them (skeletons and the attributes the rules compare, never
    whole attributes): past either, the sample's further traces are left out (and
    counted), so one team's huge traces cannot take a worker's memory; a trace is never
    cut in part.
    """
    pipeline = pipeline_with_stages(pipeline=pipeline)
    stages = list(pipeline.stages.all())
    compiled = compile_pipeline(pipeline)
    slugs = tuple(stage.slug for stage in stages)
    window = _window_traces(pipeline, start, end)
    in_window = window.count()
    chosen = list(
        window.order_by(RawSQL("md5(trace_id)", ()), "pk").only(
            "pk", "span_count", "error", "first_span_start_ns", "last_span_start_ns"
        )[:size]
    )
    budget = settings.WHATIF_MAX_SPANS
    kept: list[Trace] = []
    total = 0
    for trace in chosen:
        if total + trace.span_count > budget:
            break
        kept.append(trace)
        total += trace.span_count
    left_out_by = "spans" if len(kept) < len(chosen) else ""
    reading = _Reading(ModelRows(stage_count=len(slugs)), settings.WHATIF_MAX_BYTES)
    if not _read_all(kept, reading, compiled.matcher, stage_index(slugs)):
        left_out_by = "bytes"
    return TraceSample(
        pipeline=pipeline,
        stages=stages,
        start=start,
        end=end,
        in_window=in_window,
        left_out=len(chosen) - reading.traces,
        left_out_by=left_out_by,
        spans=reading.spans,
        bytes_read=settings.WHATIF_MAX_BYTES - reading.remaining,
        errors=reading.errors,
        model=replay_model(reading.rows, slugs),
    )


@dataclass
class _Reading:
    """What a sample has read and modelled so far."""

    rows: ModelRows
    remaining: int  # bytes the sample may still read
    traces: int = 0
    spans: int = 0
    errors: int = 0  # modelled traces with an error


def _read_all(
    traces: list[Trace], reading: _Reading, matcher: StageMatcher, index: dict[str, int]
) -> bool:
    """Model ``traces`` in order, a batch at a time; False when the bytes stopped it."""
    projection = span_projection(matcher.rules)
    pending = traces
    while pending:
        batch = _next_batch(pending)
        budget = min(reading.remaining, LOAD_BATCH_BYTES)
        read = spans_read(batch, projection=projection, max_bytes=budget)
        reading.remaining -= read.bytes_read
        reading.spans += len(read.spans)
        spans = read.by_trace()
        done = 0
        for trace in batch:
            if trace.pk == read.left_out_from:
                break
            done += 1
            by_id = unique_spans(spans.get(trace.pk, []))
            if not by_id:
                continue
            root = find_root(by_id)
            matches = trace_matches(by_id, root, matcher)
            model_add_trace(
                reading.rows, key=trace.pk, by_id=by_id, root=root, matches=matches, stages=index
            )
            reading.errors += trace.error
        reading.traces += done
        if not done:
            return False
        pending = pending[done:]
    return True


def _next_batch(traces: list[Trace]) -> list[Trace]:
    """The first traces, up to ``LOAD_BATCH_SPANS`` spans (at least one trace)."""
    spans = 0
    for count, trace in enumerate(traces):
        spans += trace.span_count
        if count and spans > LOAD_BATCH_SPANS:
            return traces[:count]
    return traces
