"""Unmatched spans alike (name, service, kind) gathered across traces into one group:
counts, times, the telling attributes' values, and a first rule for them."""

from collections import Counter
from dataclasses import dataclass, field

from apps.analysis.rule_suggestions import RuleSuggestion, StageChoice, rule_for, stage_for
from apps.analysis.spans import Span
from apps.analysis.stage_matching import attribute_text
from apps.analysis.untracked_time import UnmatchedSpan
from apps.core.time import ns_to_ms

VALUES_SHOWN = 3
# Attributes that say what a span is: the GenAI, OpenInference, database, HTTP, RPC and
# messaging conventions' names for the operation and whom it calls.
TELLING_KEYS = (
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.system", "gen_ai.request.model",
    "openinference.span.kind", "db.system.name", "db.system", "db.operation.name",
    "db.collection.name", "http.request.method", "http.method", "server.address",
    "rpc.system", "rpc.service", "messaging.system",
)  # fmt: skip
GroupKey = tuple[str, str, str]  # name, service, kind


def group_key(span: Span) -> GroupKey:
    return (span.name, span.service, span.kind)


@dataclass(frozen=True)
class AttributeValues:
    """One telling attribute of a group: its most frequent values, with their spans."""

    key: str
    values: tuple[tuple[str, int], ...]
    spans: int  # spans of the group that carry it
    distinct: int

    @property
    def more(self) -> int:
        return self.distinct - len(self.values)


@dataclass(frozen=True)
class UnmatchedSpanGroup:
    name: str
    service: str
    kind: str
    spans: int
    traces: int
    total_ns: int  # the sum of their durations
    critical_ns: int  # their time on the critical path, all untracked
    # That, and the critical-path time of the unmatched spans under them: what a rule for
    # them would bring into a stage, as those would inherit it.
    held_ns: int
    # The group whose spans hold every one of these: a rule for that one takes these too.
    inside: GroupKey | None
    p50_ns: float  # of their durations, interpolated between closest ranks
    attributes: tuple[AttributeValues, ...]
    example_trace_hex: str  # the trace of its longest span
    suggestion: RuleSuggestion | None  # None: the pipeline has no stage

    @property
    def total_ms(self) -> float:
        return ns_to_ms(self.total_ns)

    @property
    def critical_ms(self) -> float:
        return ns_to_ms(self.critical_ns)

    @property
    def held_ms(self) -> float:
        return ns_to_ms(self.held_ns)

    @property
    def p50_ms(self) -> float:
        return ns_to_ms(round(self.p50_ns))


def median(values: list[int]) -> float:
    """PostgreSQL's ``percentile_cont(0.5)``: between the two middle values when even."""
    ordered = sorted(values)
    middle = (len(ordered) - 1) / 2
    low, high = ordered[int(middle)], ordered[-int(middle) - 1]
    return (low + high) / 2


@dataclass
class SpanGroupBuilder:
    """One group as the spans come in, trace after trace."""

    spans: int = 0
    traces: set[int] = field(default_factory=set)
    durations: list[int] = field(default_factory=list)
    critical_ns: int = 0
    held_ns: int = 0
    # The group of the unmatched span each span is directly under (None: under none).
    holders: Counter[GroupKey | None] = field(default_factory=Counter)
    longest: tuple[int, int] = (-1, 0)  # (duration, minus the trace pk)
    values: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, item: UnmatchedSpan, trace_pk: int) -> None:
        span = item.span
        self.spans += 1
        self.traces.add(trace_pk)
        self.durations.append(span.duration_ns)
        self.critical_ns += item.critical_ns
        self.held_ns += item.held_ns
        self.holders[None if item.holder is None else group_key(item.holder)] += 1
        self.longest = max(self.longest, (span.duration_ns, -trace_pk))
        for key in TELLING_KEYS:
            text = attribute_text(span.attributes.get(key)) if key in span.attributes else None
            if text is not None:
                self.values.setdefault(key, Counter())[text] += 1

    @property
    def sort_key(self) -> tuple[int, int, int]:
        """Most untracked critical-path time first, then most time, then most spans."""
        return (-self.critical_ns, -sum(self.durations), -self.spans)

    def _inside(self) -> GroupKey | None:
        (holder, count), *others = self.holders.most_common(2)
        return holder if not others and count == self.spans else None

    def finished(
        self,
        key: GroupKey,
        hexes: dict[int, str],
        stages: list[StageChoice],
        empty: set[str],
    ) -> UnmatchedSpanGroup:
        """The group, with a rule for the stage its words name (``empty``: the stages no
        span reached)."""
        name, service, kind = key
        attributes = tuple(
            AttributeValues(
                key=attribute,
                values=tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:VALUES_SHOWN]),
                spans=sum(counts.values()),
                distinct=len(counts),
            )
            for attribute in TELLING_KEYS
            if (counts := self.values.get(attribute))
        )
        # The attributes every span of the group carries, with one value.
        single = {
            a.key: a.values[0][0] for a in attributes if a.distinct == 1 and a.spans == self.spans
        }
        stage = stage_for(name, single.values(), stages, empty)
        return UnmatchedSpanGroup(
            name=name,
            service=service,
            kind=kind,
            spans=self.spans,
            traces=len(self.traces),
            total_ns=sum(self.durations),
            critical_ns=self.critical_ns,
            held_ns=self.held_ns,
            inside=self._inside(),
            p50_ns=median(self.durations),
            attributes=attributes,
            example_trace_hex=hexes[-self.longest[1]],
            suggestion=None if stage is None else rule_for(name, single, stage.slug),
        )
