"""A serving engine's own account of an LLM call: time in its queue, in prefill, in decode.

vLLM's tracing (and SGLang's and llm-d's, which follow it) sets on the request's span,
in seconds (``docs/ingestion.md``, "LLM timings"):

- ``gen_ai.latency.time_in_queue``: waiting for the scheduler;
- ``gen_ai.latency.time_in_model_prefill``: the prompt's forward pass, up to the first token;
- ``gen_ai.latency.time_in_model_decode``: generating the rest;
- ``gen_ai.latency.time_to_first_token``: the engine's own first token, from the request's
  arrival.

Where the span carries queue or prefill time, the part of it before its first token is
laid out backwards from that token: prefill ends at the first token, the queue ends where
prefill starts, and what is left at the front, ``gateway``, is the time the engine does not
account for: the network and any gateway between the client and the engine on a client's
span (its first token arrives later than the engine's), the engine's own scheduling on the
engine's span. The part after the first token is ``decode``.

Every reading is total: spans stored before ingestion checked these attributes may hold
anything JSON can, and one bad span must not stop the analysis of a trace.
"""

from typing import Any

from apps.core.time import NS_PER_S

TIME_IN_QUEUE = "gen_ai.latency.time_in_queue"
TIME_IN_PREFILL = "gen_ai.latency.time_in_model_prefill"
TIME_IN_DECODE = "gen_ai.latency.time_in_model_decode"
ENGINE_FIRST_TOKEN = "gen_ai.latency.time_to_first_token"  # noqa: S105 - an attribute key
ENGINE_E2E = "gen_ai.latency.e2e"
ENGINE_KEYS = (TIME_IN_QUEUE, TIME_IN_PREFILL, TIME_IN_DECODE, ENGINE_FIRST_TOKEN, ENGINE_E2E)

# The largest offset a span can hold: its times are signed 64-bit nanoseconds.
_MAX_OFFSET_S = (2**63 - 1) / NS_PER_S


def seconds_attribute(value: Any) -> float | None:
    """Seconds from a stored attribute; None for anything that is no usable number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    # Compared before any conversion, so a huge integer cannot overflow; NaN fails too.
    if not -_MAX_OFFSET_S <= value <= _MAX_OFFSET_S:
        return None
    return float(value)


def _duration_ns(attributes: dict[str, Any], key: str) -> int | None:
    value = attributes.get(key)
    if value is None:
        return None
    seconds = seconds_attribute(value)
    return None if seconds is None else max(round(seconds * NS_PER_S), 0)


def has_engine_timing(attributes: dict[str, Any]) -> bool:
    return TIME_IN_QUEUE in attributes or TIME_IN_PREFILL in attributes


def engine_first_token_offset_ns(attributes: dict[str, Any]) -> int | None:
    """The engine's first token after the span's start: its own figure, else queue plus
    prefill; None when the span carries neither."""
    # Asked of every span a rule takes that has no first token of its own: most carry
    # none of these keys, and one test each costs less than the three readings.
    if not (
        ENGINE_FIRST_TOKEN in attributes
        or TIME_IN_QUEUE in attributes
        or TIME_IN_PREFILL in attributes
    ):
        return None
    own = _duration_ns(attributes, ENGINE_FIRST_TOKEN)
    if own is not None:
        return own
    queue = _duration_ns(attributes, TIME_IN_QUEUE)
    prefill = _duration_ns(attributes, TIME_IN_PREFILL)
    if queue is None and prefill is None:
        return None
    return (queue or 0) + (prefill or 0)


def engine_cuts(
    attributes: dict[str, Any], start_ns: int, first_token_ns: int
) -> tuple[int, int] | None:
    """Where the queue and prefill start, laid out backwards from the first token and
    clamped to the span's start; None when the span carries neither time (or neither is a
    usable number)."""
    queue = _duration_ns(attributes, TIME_IN_QUEUE)
    prefill = _duration_ns(attributes, TIME_IN_PREFILL)
    if queue is None and prefill is None:
        return None
    prefill_from = max(start_ns, first_token_ns - (prefill or 0))
    queue_from = max(start_ns, prefill_from - (queue or 0))
    return queue_from, prefill_from
