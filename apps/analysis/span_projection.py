"""What matching spans against a pipeline's rules reads of them: the projection each
span store applies where the spans are (``apps.ingest.span_store.projection``)."""

from collections import defaultdict
from collections.abc import Iterable

from apps.analysis.engine_timing import ENGINE_KEYS
from apps.analysis.stage_matching import (
    DEFAULT_FIRST_TOKEN_EVENT,
    TIME_TO_FIRST_CHUNK,
    WHOLE,
    CompiledRule,
)
from apps.ingest.span_store.projection import SPAN_OBJECT_BYTES, SpanProjection

__all__ = ["SECONDS_KEYS", "SPAN_OBJECT_BYTES", "SpanProjection", "span_projection"]

# Times in seconds that matching reads as numbers, whatever other keys the rules compare:
# they place the first token and cut an LLM span into its engine's parts.
SECONDS_KEYS = (TIME_TO_FIRST_CHUNK, *ENGINE_KEYS)


def span_projection(rules: Iterable[CompiledRule], *, shown: Iterable[str] = ()) -> SpanProjection:
    """What matching spans against ``rules`` (and finding their first tokens) reads, and
    the values of the ``shown`` keys."""
    compared: dict[str, set[str]] = defaultdict(set)
    event_names = {DEFAULT_FIRST_TOKEN_EVENT}
    for rule in rules:
        for key, text in rule.compared_texts:
            compared[key].add(text)
        if rule.portion != WHOLE:
            event_names.add(rule.first_token_event)
    return SpanProjection(
        compared={key: frozenset(texts) for key, texts in compared.items()},
        event_names=frozenset(event_names),
        shown=frozenset(shown),
        seconds_keys=SECONDS_KEYS,
    )
