from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from apps.core.models import TimeStampedModel
from apps.core.percentiles import PERCENTILES
from apps.pipelines.attribute_json import AttributeJSONEncoder
from apps.pipelines.degrade_policy import degrade_policy_validator
from apps.pipelines.stream_budget import stream_budget_validator
from apps.teams.models import Team, slug_validator


class Percentile(models.TextChoices):
    P50 = "p50", "p50"
    P90 = "p90", "p90"
    P95 = "p95", "p95"
    P99 = "p99", "p99"


class SpanKind(models.TextChoices):
    ANY = "", "any"
    INTERNAL = "internal", "internal"
    SERVER = "server", "server"
    CLIENT = "client", "client"
    PRODUCER = "producer", "producer"
    CONSUMER = "consumer", "consumer"


class Portion(models.TextChoices):
    """Which part of a span a rule takes. The last four exist only on a span carrying a
    serving engine's timings (``apps.analysis.engine_timing``)."""

    WHOLE = "whole", "whole span"
    UNTIL_FIRST_TOKEN = "until_first_token", "until first token"
    AFTER_FIRST_TOKEN = "after_first_token", "after first token"
    GATEWAY = "gateway", "network and gateway (before the engine's queue)"
    QUEUE = "queue", "engine queue"
    PREFILL = "prefill", "prefill (up to the first token)"
    DECODE = "decode", "decode (after the first token)"


ENGINE_PORTIONS = frozenset((Portion.GATEWAY, Portion.QUEUE, Portion.PREFILL, Portion.DECODE))


class NameMatch(models.TextChoices):
    GLOB = "glob", "glob"
    REGEX = "regex", "regex"


budget_validators = [MinValueValidator(1), MaxValueValidator(3_600_000)]


class Pipeline(TimeStampedModel):
    """A user-facing request path, recognised by its trace's root span."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="pipelines")
    slug = models.CharField(max_length=50, validators=[slug_validator])
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)

    match_service = models.CharField("service.name", max_length=200, blank=True)
    match_root_span = models.CharField("root span name (glob)", max_length=200, blank=True)
    match_attributes = models.JSONField(
        "root span attributes", default=dict, blank=True, encoder=AttributeJSONEncoder
    )

    # End-to-end budget in milliseconds, at any of the four percentiles.
    budget_p50_ms = models.PositiveIntegerField(null=True, blank=True, validators=budget_validators)
    budget_p90_ms = models.PositiveIntegerField(null=True, blank=True, validators=budget_validators)
    budget_p95_ms = models.PositiveIntegerField(null=True, blank=True, validators=budget_validators)
    budget_p99_ms = models.PositiveIntegerField(null=True, blank=True, validators=budget_validators)

    # Objective: objective_target percent of requests finish under objective_threshold_ms.
    objective_target = models.DecimalField(
        max_digits=6,
        decimal_places=3,
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(Decimal("99.999"))],
    )
    objective_threshold_ms = models.PositiveIntegerField(
        null=True, blank=True, validators=budget_validators
    )
    # When a run-time client last read the pipeline's runtime document (at most every few
    # minutes): the pipelines whose lever advice is kept fresh.
    runtime_read_at = models.DateTimeField(null=True, blank=True, editable=False)

    # Budget evaluation: a sliding window, a sample floor below which noise gives no
    # verdict, and how many evaluations back under budget close a violation.
    evaluation_window_s = models.PositiveIntegerField(
        default=300, validators=[MinValueValidator(60), MaxValueValidator(3600)]
    )
    min_samples = models.PositiveIntegerField(
        default=20, validators=[MinValueValidator(1), MaxValueValidator(100_000)]
    )
    close_after = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(360)]
    )

    # When the configuration that decides its traces' stage samples last changed (root
    # match, stage order, span rules): figures of traces analysed before it were computed
    # with the earlier rules until they are recomputed. Empty: not changed since it was
    # made, or not since this was recorded.
    rules_changed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "slug"], name="pipeline_unique_team_slug"),
            models.CheckConstraint(
                condition=(
                    models.Q(objective_target__isnull=True, objective_threshold_ms__isnull=True)
                    | models.Q(objective_target__isnull=False, objective_threshold_ms__isnull=False)
                ),
                name="pipeline_objective_complete",
            ),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def budget(self) -> dict[str, int]:
        """The end-to-end budget as ``{"p95": 2500, ...}``, only percentiles that are set."""
        values = {p: getattr(self, f"budget_{p}_ms") for p in PERCENTILES}
        return {p: v for p, v in values.items() if v is not None}

    @property
    def headline_budget(self) -> tuple[str, int] | None:
        """The budget the allocation bar compares against: the highest percentile set."""
        budget = self.budget
        if not budget:
            return None
        percentile = max(budget, key=PERCENTILES.index)
        return percentile, budget[percentile]

    @property
    def deadline_ms(self) -> int | None:
        """One request's end-to-end limit: the objective's threshold, else the budget of the
        highest percentile set. A limit at the median would call half the requests late;
        the objective's threshold is already a per-request limit."""
        if self.objective_threshold_ms:
            return self.objective_threshold_ms
        headline = self.headline_budget
        return None if headline is None else headline[1]


class Stage(TimeStampedModel):
    """A named step of a pipeline with its own budget; spans reach it through its rules."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="stages")
    slug = models.CharField(max_length=50, validators=[slug_validator])
    name = models.CharField(max_length=100)
    position = models.PositiveIntegerField(default=0)
    budget_percentile = models.CharField(
        max_length=3, choices=Percentile.choices, default=Percentile.P95
    )
    budget_ms = models.PositiveIntegerField(null=True, blank=True, validators=budget_validators)
    degrade = models.JSONField(
        default=dict,
        blank=True,
        validators=[degrade_policy_validator],
        help_text="The run-time client's levers for this stage (apps.pipelines.degrade_policy).",
    )
    stream_budget = models.JSONField(
        default=dict,
        blank=True,
        validators=[stream_budget_validator],
        help_text="Budgets on the streamed answers (apps.pipelines.stream_budget).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pipeline", "slug"], name="stage_unique_pipeline_slug")
        ]
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def budget(self) -> dict[str, int]:
        return {self.budget_percentile: self.budget_ms} if self.budget_ms else {}

    @property
    def stream_budgets(self) -> list[tuple[str, str, int]]:
        """(measure key, percentile, ms) of each budget on the streamed answers."""
        return [
            (key, percentile, ms)
            for key, values in (self.stream_budget or {}).items()
            for percentile, ms in values.items()
        ]

    @property
    def engine_part(self) -> bool:
        """Every rule takes a serving engine's part of an LLM call (queue, prefill, …): the
        stage lies within the stages of the call's first token and generation, and its
        budget is not one more share of the end-to-end budget. Reads ``rules``: load them
        (``stages_for_pipeline``)."""
        rules = self.rules.all()
        return bool(rules) and all(rule.portion in ENGINE_PORTIONS for rule in rules)


class SpanConditions(TimeStampedModel):
    """What a span must be for a rule to take it. Every condition set must hold; empty ones
    match all."""

    position = models.PositiveIntegerField(default=0)
    span_name = models.CharField(max_length=500, blank=True)
    name_match = models.CharField(max_length=5, choices=NameMatch.choices, default=NameMatch.GLOB)
    attributes = models.JSONField(default=dict, blank=True, encoder=AttributeJSONEncoder)
    span_kind = models.CharField(max_length=10, choices=SpanKind.choices, blank=True, default="")
    service = models.CharField(max_length=200, blank=True)

    class Meta:
        abstract = True
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return self.describe()

    def condition_parts(self) -> list[str]:
        parts = []
        if self.span_name:
            op = "~" if self.name_match == NameMatch.REGEX else "="
            parts.append(f"name {op} {self.span_name}")
        parts += [f"{key}={value}" for key, value in sorted(self.attributes.items())]
        if self.span_kind:
            parts.append(f"kind={self.span_kind}")
        if self.service:
            parts.append(f"service={self.service}")
        return parts

    def describe(self) -> str:
        return ", ".join(self.condition_parts()) or "every span"


class SpanRule(SpanConditions):
    """Maps spans to a stage."""

    stage = models.ForeignKey(Stage, on_delete=models.CASCADE, related_name="rules")
    portion = models.CharField(max_length=20, choices=Portion.choices, default=Portion.WHOLE)
    first_token_event = models.CharField(max_length=100, default="first_token")

    class Meta(SpanConditions.Meta):
        pass

    def describe(self) -> str:
        parts = self.condition_parts()
        if self.portion != Portion.WHOLE:
            parts.append(self.portion.replace("_", " "))
        return ", ".join(parts) or "every span"


class NoStageRule(SpanConditions):
    """Spans of a pipeline that belong to no stage on purpose, tried after every stage rule.

    A span no rule takes counts in the stage of its nearest ancestor that one took; a
    no-stage rule stops that: the span it takes, and its descendants no rule takes,
    stay untracked (e.g. a background flush started inside a stage span).
    """

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="no_stage_rules")

    class Meta(SpanConditions.Meta):
        pass
