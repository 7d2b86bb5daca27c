"""Span-to-stage matching: a pipeline's span rules compiled once, then applied per span.

Precedence: stages in position order, and within a stage its rules in position
order; the first rule that matches a part of a span gets that part.

Conditions of a rule, all of which must hold (an empty one matches everything):

- span name: a glob must match the whole name (case sensitive; ``*`` also
  crosses dots, ``?`` is one character, ``[a-z]``/``[!a-z]`` a class); a regex,
  in RE2 syntax, matches anywhere in the name, so anchor it with ``^...$`` to pin
  the whole name. Both run on RE2, in time linear in the name; names are matched
  on their first 500 characters, patterns have at most 500, and a stored pattern
  RE2 cannot run never matches (see ``apps.pipelines.name_patterns``);
- attributes: each key must be present and equal after both sides are turned
  into text: ``200``, ``200.0`` and ``"200"`` are equal, ``true`` equals
  ``True`` and ``"true"``; other strings compare exactly; list and map values
  never match;
- span kind: case-insensitive, with or without the OTLP ``SPAN_KIND_`` prefix;
- service: exact ``service.name``.

An LLM span splits at its first token into a part before it and a part after
it; see ``first_token_ns`` and ``StageMatcher.match``. Where it carries a serving
engine's timings (``apps.analysis.engine_timing``), the part before the first token
splits again into gateway, queue and prefill, and the part after it is decode: rules
with those portions take those parts.

A span that names its stage itself, with ``latency_budget.stage`` (the attribute the
run-time client writes, ``docs/runtime.md``), goes to that stage of the pipeline before
any written rule is tried: each stage has this declared rule first. A slug the pipeline
has no stage for matches nothing, and the written rules decide.

A pipeline's no-stage rules, tried after every stage's, mark a span that no stage
rule takes as belonging to no stage on purpose: it stays untracked, and so do its
descendants that no rule takes (``apps.analysis.stage_inheritance``).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apps.analysis.engine_timing import (
    engine_cuts,
    engine_first_token_offset_ns,
    has_engine_timing,
    seconds_attribute,
)
from apps.analysis.spans import Span
from apps.core.time import NS_PER_S
from apps.pipelines.name_patterns import NameTest, name_test

if TYPE_CHECKING:
    from apps.pipelines.models import Pipeline, SpanConditions

GLOB = "glob"
REGEX = "regex"
WHOLE = "whole"
UNTIL_FIRST_TOKEN = "until_first_token"  # noqa: S105 - portion names, not secrets
AFTER_FIRST_TOKEN = "after_first_token"  # noqa: S105
GATEWAY = "gateway"
QUEUE = "queue"
PREFILL = "prefill"
DECODE = "decode"
PORTIONS = (WHOLE, UNTIL_FIRST_TOKEN, AFTER_FIRST_TOKEN, GATEWAY, QUEUE, PREFILL, DECODE)
# The parts of a span each portion covers: before and after the first token without an
# engine's timings; gateway, queue, prefill and decode with them.
_BEFORE, _AFTER, _GATEWAY, _QUEUE, _PREFILL, _DECODE = range(6)
_COVERS = {
    WHOLE: frozenset((_BEFORE, _AFTER, _GATEWAY, _QUEUE, _PREFILL, _DECODE)),
    UNTIL_FIRST_TOKEN: frozenset((_BEFORE, _GATEWAY, _QUEUE, _PREFILL)),
    AFTER_FIRST_TOKEN: frozenset((_AFTER, _DECODE)),
    GATEWAY: frozenset((_GATEWAY,)),
    QUEUE: frozenset((_QUEUE,)),
    PREFILL: frozenset((_PREFILL,)),
    DECODE: frozenset((_DECODE,)),
}
ENGINE_PORTIONS = (GATEWAY, QUEUE, PREFILL, DECODE)
DEFAULT_FIRST_TOKEN_EVENT = "first_token"  # noqa: S105 - an event name
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
# The attribute a span names its stage with (the run-time client's protocol).
DECLARED_STAGE = "latency_budget.stage"
MATCH_CACHE_SIZE = 10_000


@dataclass(frozen=True)
class RuleSpec:
    span_name: str = ""
    name_match: str = GLOB
    attributes: dict[str, Any] = field(default_factory=dict)
    span_kind: str = ""
    service: str = ""
    portion: str = WHOLE
    first_token_event: str = DEFAULT_FIRST_TOKEN_EVENT
    position: int = 0


@dataclass(frozen=True)
class StageSpec:
    """A stage and its rules; ties in position keep the order given."""

    slug: str
    rules: Sequence[RuleSpec] = ()
    position: int = 0


def stage_specs_from_pipeline(pipeline: "Pipeline") -> list[StageSpec]:
    """Specs from a pipeline whose stages and rules are loaded (``pipeline_with_stages``)."""
    return [
        StageSpec(
            slug=stage.slug,
            position=stage.position,
            rules=[
                _rule_spec(rule, portion=rule.portion, first_token_event=rule.first_token_event)
                for rule in stage.rules.all()
            ],
        )
        for stage in pipeline.stages.all()
    ]


def _rule_spec(rule: "SpanConditions", **extra: Any) -> RuleSpec:
    return RuleSpec(
        span_name=rule.span_name,
        name_match=rule.name_match,
        attributes=dict(rule.attributes),
        span_kind=rule.span_kind,
        service=rule.service,
        position=rule.position,
        **extra,
    )


def no_stage_specs_from_pipeline(pipeline: "Pipeline") -> list[RuleSpec]:
    """The no-stage rules of a pipeline loaded by ``with_rules``."""
    return [_rule_spec(rule) for rule in pipeline.no_stage_rules.all()]


def attribute_text(value: Any) -> str | None:
    """The text an attribute value compares as; None for values that never match."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return None


def normalise_kind(kind: str) -> str:
    return kind.strip().lower().removeprefix("span_kind_")


def first_token_ns(span: Span, event_name: str = DEFAULT_FIRST_TOKEN_EVENT) -> int | None:
    """When the span's first token arrived, clamped into the span; None when unknown.

    ``gen_ai.response.time_to_first_chunk`` (seconds after the start) wins over
    the earliest event named ``event_name``, unless it is no usable number (see
    ``seconds_attribute``); both are the client's first token and win over a serving
    engine's own (``engine_first_token_offset_ns``). It never raises, whatever the
    stored value.
    """
    value = span.attributes.get(TIME_TO_FIRST_CHUNK)
    seconds = None if value is None else seconds_attribute(value)
    times = [time for name, time in span.events if name == event_name] if span.events else ()
    if seconds is not None:
        token = span.start_ns + round(seconds * NS_PER_S)
    elif times:
        token = min(times)
    else:
        offset = engine_first_token_offset_ns(span.attributes)
        if offset is None:
            return None
        token = span.start_ns + offset
    return min(max(token, span.start_ns), span.stop_ns)


@dataclass(slots=True)
class EngineSplit:
    """The part of a span before its first token taken apart by a serving engine's timings:
    ``[queue_from, prefill_from)`` is ``queue_stage``'s and ``[prefill_from, first_token)``
    ``prefill_stage``'s; what comes before ``queue_from`` stays the match's ``before_stage``
    (the gateway's part). Absolute times, so a child that inherits them splits alike."""

    queue_from: int
    queue_stage: str | None
    prefill_from: int
    prefill_stage: str | None


# Not frozen: a frozen dataclass costs five times as much to build, and trace analysis
# builds several per span; instances are never changed after construction.
@dataclass(slots=True)
class SpanMatch:
    """Which stage gets which part of a span, and why.

    With a known first token the span is ``[start, first_token)`` for
    ``before_stage`` and ``[first_token, stop)`` for ``after_stage``; without
    one it is a single part and both names hold its stage. None is untracked.
    With ``engine`` (a serving engine's timings, and rules that tell its parts apart)
    the part before the first token is cut again: see ``EngineSplit``.

    Why: ``rule`` is the index in ``StageMatcher.rules`` of the rule that took the
    span (its first part, when the parts went to different rules); ``no_stage`` says
    a no-stage rule took it; ``inherited_from`` names the ancestor whose stage a span
    no rule took has inherited (``apps.analysis.stage_inheritance``).
    """

    first_token_ns: int | None
    before_stage: str | None
    after_stage: str | None
    # Why, left out of equality: two matches are equal when they give the same parts to
    # the same stages.
    rule: int | None = field(default=None, compare=False)
    no_stage: bool = field(default=False, compare=False)
    inherited_from: str | None = field(default=None, compare=False)
    engine: EngineSplit | None = None

    @property
    def decided(self) -> bool:
        """A rule of the pipeline took this span (a stage rule or a no-stage rule)."""
        return self.rule is not None

    @property
    def splits(self) -> bool:
        """Its parts go to more than one stage (or to a stage and to none)."""
        if self.first_token_ns is None:
            return False
        engine = self.engine
        if engine is None:
            return self.before_stage != self.after_stage
        return (
            len({self.before_stage, engine.queue_stage, engine.prefill_stage, self.after_stage}) > 1
        )

    def stages(self) -> tuple[str | None, ...]:
        """The stages its parts go to in time order, a stage repeated only where another
        comes between."""
        if self.first_token_ns is None:
            return (self.before_stage,)
        engine = self.engine
        ordered = (
            (self.before_stage, self.after_stage)
            if engine is None
            else (self.before_stage, engine.queue_stage, engine.prefill_stage, self.after_stage)
        )
        return tuple(
            stage
            for index, stage in enumerate(ordered)
            if index == 0 or ordered[index - 1] != stage
        )

    def stage_at(self, time_ns: int) -> str | None:
        token = self.first_token_ns
        if token is None:
            return self.before_stage
        if time_ns >= token:
            return self.after_stage
        engine = self.engine
        if engine is not None:
            if time_ns >= engine.prefill_from:
                return engine.prefill_stage
            if time_ns >= engine.queue_from:
                return engine.queue_stage
        return self.before_stage

    def pieces(self, start_ns: int, end_ns: int) -> list[tuple[int, int, str | None]]:
        """``[start, end)`` cut where the stage changes hands; one piece when it does not."""
        token = self.first_token_ns
        if token is None or not start_ns < token:
            return [(start_ns, end_ns, self.stage_at(start_ns))]
        engine = self.engine
        cuts = (token,) if engine is None else (engine.queue_from, engine.prefill_from, token)
        pieces = []
        at = start_ns
        for cut in cuts:
            if at < cut < end_ns:
                pieces.append((at, cut, self.stage_at(at)))
                at = cut
        pieces.append((at, end_ns, self.stage_at(at)))
        return pieces

    def parts(self, span: Span) -> list[tuple[int, int, str | None]]:
        """The span's parts, one per stage-taking portion, zero-length ones included: a
        span whose engine queued it for no time took part in the queue's stage with 0 ns.

        A span that inherited an engine's cuts (``apps.analysis.stage_inheritance``) has
        only the parts it overlaps, clamped to it.
        """
        token = self.first_token_ns
        if token is None:
            return [(span.start_ns, span.stop_ns, self.before_stage)]
        engine = self.engine
        if engine is None:
            return [
                (span.start_ns, token, self.before_stage),
                (token, span.stop_ns, self.after_stage),
            ]
        start, stop = span.start_ns, span.stop_ns
        bounds = (start, engine.queue_from, engine.prefill_from, token, stop)
        stages = (self.before_stage, engine.queue_stage, engine.prefill_stage, self.after_stage)
        return [
            (min(max(lo, start), stop), min(max(hi, start), stop), stage)
            for lo, hi, stage in zip(bounds[:-1], bounds[1:], stages, strict=True)
            if lo <= stop and hi >= start
        ]


class CompiledRule:
    __slots__ = (
        "_attributes",
        "_kind",
        "_name",
        "_service",
        "first_token_event",
        "portion",
        "stage",
    )

    def __init__(self, stage: str | None, spec: RuleSpec) -> None:
        if spec.portion not in _COVERS:
            raise ValueError(f"Unknown portion {spec.portion!r}.")
        self.stage = stage
        self.portion = spec.portion
        self.first_token_event = spec.first_token_event or DEFAULT_FIRST_TOKEN_EVENT
        self._service = spec.service
        self._kind = normalise_kind(spec.span_kind)
        self._name = _name_test(spec.span_name, spec.name_match)
        self._attributes = tuple(
            (key, attribute_text(value)) for key, value in spec.attributes.items()
        )

    @property
    def attribute_keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self._attributes)

    @property
    def compared_texts(self) -> tuple[tuple[str, str], ...]:
        """(key, text) for each attribute condition; one that can never hold is left out."""
        return tuple((key, text) for key, text in self._attributes if text is not None)

    def matches(self, span: Span) -> bool:
        if self._service and span.service != self._service:
            return False
        if self._kind and normalise_kind(span.kind) != self._kind:
            return False
        if self._name is not None and not self._name(span.name):
            return False
        attributes = span.attributes
        for key, wanted in self._attributes:
            if wanted is None or key not in attributes:
                return False
            if attribute_text(attributes[key]) != wanted:
                return False
        return True


def _name_test(pattern: str, name_match: str) -> NameTest | None:
    """None when the rule has no name condition.

    A pattern RE2 cannot run never matches, so one team's broken rule cannot fail
    a pass shared with other teams.
    """
    if not pattern:
        return None
    return name_test(pattern=pattern, kind=name_match)


# The stages of a span's gateway, queue, prefill and decode parts, and the index of the
# rule that took the first of them: what its rules decide for a span with engine timings.
EngineDecision = tuple[str | None, str | None, str | None, str | None, int | None]
# What a span's signature decides: the first token's event name, the stages before
# and after the first token, the deciding rule's index, whether a no-stage rule took it,
# and, where rules tell an engine's parts apart from that, what they give them.
Decision = tuple[str, str | None, str | None, int | None, bool, EngineDecision | None]


class StageMatcher:
    """A pipeline's stages and rules, compiled once and reused for every span.

    ``rules`` holds the stages' written rules, the no-stage rules, then one declared
    rule per stage (``DECLARED_STAGE`` equal to its slug), which is tried before all
    the others; an index into it names a rule whatever the declared ones. ``no_stage``
    rules are tried after every stage rule; a span one of them takes (and no stage rule
    does) is untracked on purpose, and its descendants do not inherit any stage through it.
    """

    def __init__(self, stages: Iterable[StageSpec], no_stage: Iterable[RuleSpec] = ()) -> None:
        ordered = sorted(stages, key=lambda stage: stage.position)
        self.stage_slugs = tuple(stage.slug for stage in ordered)
        if len(set(self.stage_slugs)) != len(self.stage_slugs):
            raise ValueError("Stage slugs must be unique within a pipeline.")
        stage_rules = tuple(
            CompiledRule(stage.slug, rule)
            for stage in ordered
            for rule in sorted(stage.rules, key=lambda rule: rule.position)
        )
        self._no_stage_from = len(stage_rules)
        no_stage_rules = tuple(
            CompiledRule(None, rule) for rule in sorted(no_stage, key=lambda rule: rule.position)
        )
        self._declared_from = len(stage_rules) + len(no_stage_rules)
        declared = tuple(
            CompiledRule(stage.slug, RuleSpec(attributes={DECLARED_STAGE: stage.slug}))
            for stage in ordered
        )
        self._rules = stage_rules + no_stage_rules + declared
        self._keys = tuple(sorted({key for rule in self._rules for key in rule.attribute_keys}))
        self._cache: dict[tuple[str | None, ...], Decision] = {}

    @property
    def rules(self) -> tuple[CompiledRule, ...]:
        """Every rule: the stages' written rules, the no-stage rules, the declared rules."""
        return self._rules

    def is_no_stage_rule(self, index: int) -> bool:
        return self._no_stage_from <= index < self._declared_from

    def is_declared_rule(self, index: int) -> bool:
        """The rule at ``index`` takes spans that name their stage (``DECLARED_STAGE``)."""
        return index >= self._declared_from

    def match(self, span: Span) -> SpanMatch:
        """Give each part of the span to the first stage with a rule covering it.

        ``whole`` covers both parts, ``until_first_token`` the part before the
        first token, ``after_first_token`` the part after it. Without a known
        first token the span is one part: a non-streaming call's first token is
        its end, so ``until_first_token`` rules take all of it and
        ``after_first_token`` rules take nothing.

        A span with a serving engine's timings has four parts instead: gateway, queue
        and prefill before the first token, decode after it. ``gateway``, ``queue``,
        ``prefill`` and ``decode`` rules take only those (and nothing of a span without
        the timings); ``until_first_token`` covers the first three.

        The first token's event name comes from the first matching rule that
        splits (portion other than whole), else the default ``first_token``.
        """
        event_name, before, after, rule, no_stage, engine = self._decide(span)
        if engine is not None and has_engine_timing(span.attributes):
            split = _engine_match(span, event_name, engine)
            if split is not None:
                return split
        if rule is None or no_stage:
            return SpanMatch(None, None, None, rule, no_stage)
        token = first_token_ns(span, event_name)
        if token is None:
            if before is None:
                # Only after-first-token rules took it, and a span without a first token
                # has no such part: no rule took it after all.
                return SpanMatch(None, None, None)
            return SpanMatch(None, before, before, rule)
        return SpanMatch(token, before, after, rule)

    def part_rules(self, span: Span, match: SpanMatch) -> tuple[int, ...]:
        """The stage rules that took the parts of a span its own rules matched, in the
        parts' order, each once: one rule, or one per side of the first token, or one per
        part of an engine's split."""
        if match.first_token_ns is None:
            return () if match.rule is None else (match.rule,)
        parts = (_BEFORE, _AFTER) if match.engine is None else (_GATEWAY, _QUEUE, _PREFILL, _DECODE)
        matched = [
            (index, rule)
            for index, rule in enumerate(self._rules[: self._no_stage_from])
            if rule.matches(span)
        ]
        found = (
            next((index for index, rule in matched if part in _COVERS[rule.portion]), None)
            for part in parts
        )
        return tuple(dict.fromkeys(index for index in found if index is not None))

    def _decide(self, span: Span) -> Decision:
        # Spans of one kind repeat across traces with the same name, service and
        # rule-relevant attributes; remembering the decision keeps per-span work flat.
        attributes = span.attributes
        signature = (
            span.name,
            span.service,
            span.kind,
            *[attribute_text(attributes.get(key)) for key in self._keys],
        )
        decision = self._cache.get(signature)
        if decision is None:
            if len(self._cache) >= MATCH_CACHE_SIZE:
                self._cache.clear()
            decision = self._decide_uncached(span)
            self._cache[signature] = decision
        return decision

    def _decide_uncached(self, span: Span) -> Decision:
        for index in range(self._declared_from, len(self._rules)):
            if self._rules[index].matches(span):
                slug = self._rules[index].stage
                return (DEFAULT_FIRST_TOKEN_EVENT, slug, slug, index, False, None)
        matched = [
            (index, rule)
            for index, rule in enumerate(self._rules[: self._no_stage_from])
            if rule.matches(span)
        ]
        if not matched:
            excluded = next(
                (
                    index
                    for index, rule in enumerate(self._rules)
                    if self.is_no_stage_rule(index) and rule.matches(span)
                ),
                None,
            )
            return (DEFAULT_FIRST_TOKEN_EVENT, None, None, excluded, excluded is not None, None)
        event = next(
            (rule.first_token_event for _, rule in matched if rule.portion != WHOLE),
            DEFAULT_FIRST_TOKEN_EVENT,
        )

        def first(part: int) -> tuple[int, str | None] | None:
            return next(
                ((index, rule.stage) for index, rule in matched if part in _COVERS[rule.portion]),
                None,
            )

        def stage(taken: tuple[int, str | None] | None) -> str | None:
            return None if taken is None else taken[1]

        before, after = first(_BEFORE), first(_AFTER)
        # The rule of the first part; with only an after-first-token rule, that one.
        deciding = before if before is not None else after
        engine_parts = (first(_GATEWAY), first(_QUEUE), first(_PREFILL), first(_DECODE))
        gateway, queue, prefill, decode = (stage(taken) for taken in engine_parts)
        engine: EngineDecision | None = None
        # Only where the engine's parts go elsewhere than plain first-token rules send them.
        if (gateway, queue, prefill, decode) != (
            stage(before),
            stage(before),
            stage(before),
            stage(after),
        ):
            engine_first = next(taken for taken in engine_parts if taken is not None)
            engine = (gateway, queue, prefill, decode, engine_first[0])
        return (
            event,
            stage(before),
            stage(after),
            None if deciding is None else deciding[0],
            False,
            engine,
        )


def _engine_match(span: Span, event_name: str, engine: EngineDecision) -> SpanMatch | None:
    """The match of a span with engine timings; None when they hold no usable number."""
    token = first_token_ns(span, event_name)
    if token is None:
        return None
    cuts = engine_cuts(span.attributes, span.start_ns, token)
    if cuts is None:
        return None
    gateway, queue, prefill, decode, rule = engine
    return SpanMatch(
        token, gateway, decode, rule, engine=EngineSplit(cuts[0], queue, cuts[1], prefill)
    )
