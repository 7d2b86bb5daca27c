"""A planned trace read as the steps an application runs one after the other.

The planner draws a request as spans with offsets; an application that runs it in real
time needs each step's wait before it, its duration, the first token of the LLM call and
whether it fails: the same draws, so both ways of sending traffic share one model.
"""

from dataclasses import dataclass

from opentelemetry.util.types import AttributeValue

from apps.demo.traffic.llm_call import EngineDraw
from apps.demo.traffic.traffic_plan import PlannedSpan, TracePlan

TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
FIRST_TOKEN_EVENT = "first_token"  # noqa: S105 - an event name


@dataclass(frozen=True)
class PlannedStep:
    step: str  # a key of traffic_plan.MEDIAN_MS, or "chat" for the LLM call
    name: str  # the span's name in a replayed trace: "execute_tool web_search"
    gap_before_ms: float  # orchestration since the previous step ended
    duration_ms: float
    first_token_ms: float | None = None  # the LLM call's, from its start
    error: str | None = None
    # The LLM call's model as the plan drew it, the serving engine's draw, its chunks after
    # the first (ms after the first token) and its token counts.
    model: str = ""
    engine: EngineDraw | None = None
    chunks_ms: tuple[float, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class PlannedRequest:
    root_name: str
    root_attributes: dict[str, AttributeValue]
    steps: tuple[PlannedStep, ...]
    gap_after_ms: float  # orchestration after the last step, before the response

    def step(self, name: str) -> PlannedStep | None:
        return next((step for step in self.steps if step.step == name), None)


def planned_request(plan: TracePlan) -> PlannedRequest:
    """The root's direct children in order, as steps; their own children (the shards of
    a retrieval) are inside the step's duration."""
    cursor = plan.root.start_ms
    steps = []
    for span in sorted(
        (span for span in plan.spans if span.parent == plan.root.index),
        key=lambda span: span.start_ms,
    ):
        if span.step is None:
            raise ValueError(f"The planned span {span.name} names no step.")
        steps.append(
            PlannedStep(
                step=span.step,
                name=span.name,
                gap_before_ms=max(span.start_ms - cursor, 0.0),
                duration_ms=span.end_ms - span.start_ms,
                first_token_ms=_first_token_ms(span),
                error=span.error,
                model=str(span.attributes.get("gen_ai.request.model", "")),
                engine=span.engine,
                chunks_ms=span.chunks_ms,
                input_tokens=_count(span, "gen_ai.usage.input_tokens"),
                output_tokens=_count(span, "gen_ai.usage.output_tokens"),
            )
        )
        cursor = span.end_ms
    return PlannedRequest(
        root_name=plan.root.name,
        root_attributes=dict(plan.root.attributes),
        steps=tuple(steps),
        gap_after_ms=max(plan.root.end_ms - cursor, 0.0),
    )


def _first_token_ms(span: PlannedSpan) -> float | None:
    # The planner writes the first token either way an instrumentation does.
    seconds = span.attributes.get(TIME_TO_FIRST_CHUNK)
    if isinstance(seconds, int | float):
        return float(seconds) * 1000
    for name, offset, _attributes in span.events:
        if name == FIRST_TOKEN_EVENT:
            return offset - span.start_ms
    return None


def _count(span: PlannedSpan, key: str) -> int:
    value = span.attributes.get(key)
    return value if isinstance(value, int) else 0
