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
from apps.analysis.spans import unique_spans
from apps.analysis.stored_spans import spans_of_traces
from apps.core.time import NS_PER_S
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.selectors import pipeline_with_stages
from apps.whatif.dependency import ModelRows, model_add_trace, stage_index
from apps.whatif.replay import ReplayModel, replay_model

DEFAULT_TRACES = 2000
MAX_TRACES = 20_000
# Spans loaded per batch of traces: a bounded piece of memory however large a trace is.
LOAD_BATCH_SPANS = 50_000


@dataclass(frozen=True)
class TraceSample:
    pipeline: Pipeline
    stages: list[Stage]
    start: int  # epoch seconds, the window asked for
    end: int
    in_window: int  # analyzed complete traces in the window
    left_out: int  # sampled traces over the span budget of one replay
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

    A sample holds at most ``WHATIF_MAX_SPANS`` spans: past them, the sample's further
    traces are left out (and counted), so one team's huge traces cannot take a worker's
    memory; a trace is never cut in part.
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
    rows = ModelRows(stage_count=len(slugs))
    index = stage_index(slugs)
    matcher = compiled.matcher
    errors = 0
    for batch in _batches(kept):
        spans = spans_of_traces(batch)
        for trace in batch:
            by_id = unique_spans(spans.get(trace.pk, []))
            if not by_id:
                continue
            root = find_root(by_id)
            matches = {span_id: matcher.match(span) for span_id, span in by_id.items()}
            model_add_trace(
                rows, key=trace.pk, by_id=by_id, root=root, matches=matches, stages=index
            )
            errors += trace.error
    return TraceSample(
        pipeline=pipeline,
        stages=stages,
        start=start,
        end=end,
        in_window=in_window,
        left_out=len(chosen) - len(kept),
        errors=errors,
        model=replay_model(rows, slugs),
    )


def _batches(traces: list[Trace]) -> list[list[Trace]]:
    batches: list[list[Trace]] = []
    current: list[Trace] = []
    spans = 0
    for trace in traces:
        if current and spans + trace.span_count > LOAD_BATCH_SPANS:
            batches.append(current)
            current, spans = [], 0
        current.append(trace)
        spans += trace.span_count
    if current:
        batches.append(current)
    return batches
