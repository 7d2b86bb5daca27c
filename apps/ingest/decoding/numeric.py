"""Attributes that analysis reads as numbers, checked where spans are decoded.

A value out of range or not a number at all is dropped from the span, which is
kept; the drop is reported in the response and noted on the span under
``DROPPED_ATTRIBUTES``. Integers beyond signed 64 bits cannot be OTLP ints and
are dropped wherever they appear; only the JSON decoders can produce them.
"""

import reprlib
from typing import Any, NamedTuple

TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
# Streaming answers start within seconds; a day leaves room for any real one.
MAX_TIME_TO_FIRST_CHUNK_S = 86_400
# Far above any model's context window, and exact as a double.
MAX_TOKEN_COUNT = 1_000_000_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Reserved: the notes of what was dropped from a span, one short string each.
DROPPED_ATTRIBUTES = "latency_budgets.dropped_attributes"
MAX_NOTES = 10
NOTE_VALUE_CHARS = 40
NOTE_KEY_CHARS = 100
# Containers are shown by their first items: a whole list's repr could be megabytes.
_container_repr = reprlib.Repr()
_container_repr.maxlevel, _container_repr.maxlist, _container_repr.maxdict = 3, 4, 4
_container_repr.maxlong = NOTE_VALUE_CHARS


class Problem:
    """Why an attribute was dropped."""

    NOT_A_NUMBER = "not a number"
    OUT_OF_RANGE = "out of range"
    NOT_WHOLE = "not a whole number"
    BIG_INTEGER = "integer outside 64-bit range"


class Drop(NamedTuple):
    key: str
    problem: str
    value: Any

    @property
    def summary(self) -> str:
        """The reason it is counted under; bounded in number whatever the keys sent."""
        if self.key in NUMERIC_KEYS:
            return f"{self.key} {self.problem}"
        return self.problem

    @property
    def note(self) -> str:
        return f"{_shortened(self.key, NOTE_KEY_CHARS)}: {self.problem} ({value_text(self.value)})"


class BigInteger(Exception):
    """Raised while converting a value that holds an integer beyond signed 64 bits."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def _number(value: Any) -> int | float | None:
    kind = type(value)  # bool is an int subclass, and no number
    if kind is int or kind is float:
        number = value
    elif kind is str:
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return None if number != number else number  # NaN


def _problem(value: Any, high: int, whole: bool) -> str | None:
    number = _number(value)
    if number is None:
        return Problem.NOT_A_NUMBER
    # Compared as given: a huge integer is never turned into a float.
    if not 0 <= number <= high:
        return Problem.OUT_OF_RANGE
    if whole and type(number) is float and not number.is_integer():
        return Problem.NOT_WHOLE
    return None


# A serving engine's timings, in seconds (``apps.analysis.engine_timing``).
ENGINE_SECONDS = (
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
)

# Key, largest valid value (the smallest is 0), whether it counts something.
_RANGES = (
    (TIME_TO_FIRST_CHUNK, MAX_TIME_TO_FIRST_CHUNK_S, False),
    *((key, MAX_TIME_TO_FIRST_CHUNK_S, False) for key in ENGINE_SECONDS),
    ("gen_ai.usage.input_tokens", MAX_TOKEN_COUNT, True),
    ("gen_ai.usage.output_tokens", MAX_TOKEN_COUNT, True),
    ("gen_ai.usage.prompt_tokens", MAX_TOKEN_COUNT, True),
    ("gen_ai.usage.completion_tokens", MAX_TOKEN_COUNT, True),
)
NUMERIC_KEYS = frozenset(key for key, _, _ in _RANGES)


def unusable_numbers_drop(attributes: dict[str, Any], drops: list[Drop]) -> None:
    """Remove the known numeric attributes that hold no usable number, adding to ``drops``.

    Callers skip it for spans with none of ``NUMERIC_KEYS`` (``isdisjoint``).
    """
    for key, high, whole in _RANGES:
        value = attributes.get(key)
        if value is None:
            continue
        kind = type(value)
        # Inlined happy path: an int or float in range (also false for NaN).
        if (kind is int or (kind is float and (not whole or value.is_integer()))) and (
            0 <= value <= high
        ):
            continue
        problem = _problem(value, high, whole)
        if problem is not None:
            del attributes[key]
            drops.append(Drop(key, problem, value))


def holds_big_integer(value: Any) -> bool:
    """Whether a decoded JSON value has an integer beyond signed 64 bits anywhere inside."""
    kind = type(value)
    if kind is int:
        return not INT64_MIN <= value <= INT64_MAX
    if kind is list:
        return any(holds_big_integer(item) for item in value)
    if kind is dict:
        return any(holds_big_integer(item) for item in value.values())
    return False


def drop_notes(drops: list[Drop]) -> list[str]:
    """What ``DROPPED_ATTRIBUTES`` holds: a note per drop, at most ``MAX_NOTES`` and a tally."""
    notes = [drop.note for drop in drops[:MAX_NOTES]]
    if len(drops) > MAX_NOTES:
        notes.append(f"and {len(drops) - MAX_NOTES} more")
    return notes


def value_text(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, list | dict):
        text = _container_repr.repr(value)
    else:
        text = repr(value)  # decoders never make integers with more digits than repr allows
    return _shortened(text, NOTE_VALUE_CHARS)


def _shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
