"""Why a span counts where it does: the stage it names itself, the rule that took it, the
span above it whose stage it inherited, a no-stage rule, or nothing at all; in words for
the trace page and API.

A ``SpanMatch`` names its deciding rule by index into ``StageMatcher.rules``; the
editor numbers rules within their stage (or among the no-stage rules) from 1, so the
reason carries that number and the rule's conditions as the editor shows them.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from apps.analysis.spans import Span
from apps.analysis.stage_matching import DECLARED_STAGE, SpanMatch, StageMatcher
from apps.pipelines.models import Pipeline

RULE = "rule"
DECLARED = "declared"
INHERITED = "inherited"
NO_STAGE_RULE = "no_stage_rule"
UNTRACKED = "untracked"
REASON_KINDS = (DECLARED, RULE, INHERITED, NO_STAGE_RULE, UNTRACKED)


@dataclass(frozen=True)
class RuleLabel:
    """A saved rule as the editor lists it; a declared rule has no id (0) and number 0."""

    rule_id: int
    stage: str | None  # its stage's slug; None: a no-stage rule
    number: int  # from 1, within its stage or among the no-stage rules
    description: str


def rule_labels(pipeline: Pipeline) -> tuple[RuleLabel, ...]:
    """The pipeline's rules in the order ``StageMatcher.rules`` holds them, for a pipeline
    loaded by ``with_rules``: stages by position with their rules by position, the
    no-stage rules by position, then each stage's declared rule; ties keep the loaded
    order, as the matcher's sorts do."""
    stages = sorted(pipeline.stages.all(), key=lambda stage: stage.position)
    labels = []
    for stage in stages:
        rules = sorted(stage.rules.all(), key=lambda rule: rule.position)
        labels += [
            RuleLabel(rule.pk, stage.slug, number, rule.describe())
            for number, rule in enumerate(rules, 1)
        ]
    no_stage = sorted(pipeline.no_stage_rules.all(), key=lambda rule: rule.position)
    labels += [
        RuleLabel(rule.pk, None, number, rule.describe()) for number, rule in enumerate(no_stage, 1)
    ]
    labels += [RuleLabel(0, stage.slug, 0, f"{DECLARED_STAGE} = {stage.slug}") for stage in stages]
    return tuple(labels)


@dataclass(frozen=True)
class StageReason:
    """Where a span's time goes and why. ``stages`` holds one stage for a span counted
    whole, or the stages before and after its first token when that splits it, or those of
    its parts in time order when an engine's timings split it further (None: untracked);
    ``rules`` the rules that decided them, in that order."""

    kind: str
    stages: tuple[str | None, ...]
    rules: tuple[RuleLabel, ...] = ()
    ancestor_id: str | None = None
    ancestor_name: str = ""
    ancestor_no_stage: bool = False  # the ancestor is in no stage by a no-stage rule

    @property
    def stage(self) -> str | None:
        """The stage of the span's start."""
        return self.stages[0]

    def stage_words(self, names: dict[str, str]) -> str:
        """ "Retrieval", "no stage", "untracked", "TTFT until the first token, then Generation"."""
        if self.kind == NO_STAGE_RULE:
            return "no stage"
        words = [UNTRACKED if slug is None else names.get(slug, slug) for slug in self.stages]
        if len(words) == 1:
            return words[0]
        if len(words) == 2:
            return f"{words[0]} until the first token, then {words[1]}"
        # A serving engine's timings split it further (gateway, queue, prefill, decode).
        return ", then ".join(words)

    def why(self, names: dict[str, str]) -> str:
        """The reason alone: "rule 1: name = retrieval", "inside `retrieval` (span …)"."""
        if self.kind == DECLARED:
            return f"named by the span: {self.rules[0].description}"
        if self.kind == RULE:
            if len(self.rules) == 1:
                return f"rule {self.rules[0].number}: {self.rules[0].description}"
            return "; ".join(
                f"{names.get(rule.stage or '', rule.stage)} rule {rule.number}: {rule.description}"
                for rule in self.rules
            )
        if self.kind == NO_STAGE_RULE:
            return f"no-stage rule {self.rules[0].number}: {self.rules[0].description}"
        if self.kind == INHERITED:
            kept_out = ", kept out of every stage by a no-stage rule"
            return (
                f"inside `{self.ancestor_name}` (span {self.ancestor_id})"
                f"{kept_out if self.ancestor_no_stage else ''}"
            )
        return "no rule, no stage above it"

    def short(self) -> str:
        """A word or two for a waterfall row, where the tree shows the ancestor: "rule 1",
        "rules" (one each side of a first token), "inherited", "no-stage rule 2"."""
        if self.kind == DECLARED:
            return "declared"
        if self.kind == RULE:
            return f"rule {self.rules[0].number}" if len(self.rules) == 1 else "rules"
        if self.kind == NO_STAGE_RULE:
            return f"no-stage rule {self.rules[0].number}"
        if self.kind == INHERITED:
            return "inherited"
        return "no rule"

    def text(self, names: dict[str, str]) -> str:
        """ "Retrieval — rule 1: name = retrieval"."""
        return f"{self.stage_words(names)} — {self.why(names)}"


def stage_reason(
    span: Span,
    match: SpanMatch,
    *,
    matcher: StageMatcher,
    labels: tuple[RuleLabel, ...],
    by_id: Mapping[str, Span],
    matches: Mapping[str, SpanMatch],
) -> StageReason:
    """Why ``span`` counts where ``match`` (after inheritance) puts it; ``labels`` are
    ``rule_labels`` of the pipeline ``matcher`` was compiled from, ``matches`` every
    span's match, to tell whether the ancestor it inherited from is in no stage."""
    stages = match.stages()
    if match.rule is not None and match.no_stage:
        return StageReason(NO_STAGE_RULE, (None,), (labels[match.rule],))
    if match.rule is not None and matcher.is_declared_rule(match.rule):
        return StageReason(DECLARED, stages, (labels[match.rule],))
    if match.rule is not None:
        taken = matcher.part_rules(span, match) or (match.rule,)
        return StageReason(RULE, stages, tuple(labels[index] for index in taken))
    if match.inherited_from is not None:
        ancestor = by_id.get(match.inherited_from)
        source = matches.get(match.inherited_from)
        return StageReason(
            INHERITED,
            stages,
            ancestor_id=match.inherited_from,
            ancestor_name=ancestor.name if ancestor is not None else "",
            ancestor_no_stage=source is not None and source.no_stage,
        )
    return StageReason(UNTRACKED, (None,))
