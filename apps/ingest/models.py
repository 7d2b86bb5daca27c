"""Stored spans and the traces they assemble into.

``Span`` is the hot table: on PostgreSQL it is partitioned by day of span start
(see ``apps.core.partitions``) and keyed by (trace_pk, span_id, start_ns), which
grows with the sequential trace id instead of scattering random trace ids over a
B-tree. ``Trace`` holds one row per trace: the unique (team, trace_id) lookup is
paid once per trace, not once per span.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F

from apps.pipelines.models import Pipeline
from apps.teams.models import IngestToken, Team


class Encoding(models.IntegerChoices):
    OTLP_PROTOBUF = 1, "OTLP protobuf"
    OTLP_JSON = 2, "OTLP JSON"
    NATIVE_JSON = 3, "native JSON"
    # The accepted spans, decoded by the request path, as PostgreSQL binary COPY rows.
    SPAN_ROWS = 4, "span rows"


class RawBatch(models.Model):
    """An accepted request's spans, kept until they are stored.

    Committing this row is what a 2xx promises; a worker turns pending batches
    into spans and deletes them in the same transaction. On PostgreSQL the body
    holds the accepted spans as ready COPY rows (``SPAN_ROWS``), decoded once by
    the request path; elsewhere it is the request body as sent (decompressed).
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    token = models.ForeignKey(
        IngestToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    encoding = models.PositiveSmallIntegerField(choices=Encoding.choices)
    body = models.BinaryField()
    span_count = models.PositiveIntegerField()
    received_at = models.DateTimeField(db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.span_count} spans)"


class TraceState(models.IntegerChoices):
    """Where a trace is in assembly.

    SETTLED: its root is present and it has been quiet for ``TRACE_SETTLE_SECONDS``, so
    its derived data is computed; it is final, without another write, once
    ``TRACE_IDLE_SECONDS`` pass with no new span (see ``Trace.state_label``). A new span
    makes any trace OPEN again, except a QUARANTINED one: its analysis failed or ran past
    its time budget, and it waits for an operator's retry (``manage.py quarantine``).
    """

    OPEN = 0, "open"
    FINALIZED = 1, "finalized"
    SETTLED = 2, "settled"
    QUARANTINED = 3, "quarantined"


# States whose derived data (pipeline, summary, stage samples) is computed.
ANALYZED_STATES = (TraceState.FINALIZED, TraceState.SETTLED)

# What a trace's search set holds of attributes (``Trace.search_hashes``, by analysis):
# pairs whose key or value text is longer are left out, and at most so many pairs a
# trace. Prompts, statements and URLs are longer than anyone filters on; a trace of
# ordinary spans has a few dozen pairs.
ATTRIBUTE_KEY_MAX_CHARS = 128
ATTRIBUTE_VALUE_MAX_CHARS = 256
ATTRIBUTE_MAX_PAIRS = 1000


# Traces that failed or lost their root: the list's error and incomplete filters.
TROUBLE = models.Q(start_ns__isnull=False) & (models.Q(error=True) | models.Q(incomplete=True))


class Trace(models.Model):
    """Assembly state and summary of one trace."""

    # No index of its own: the unique (team, trace_id) index leads with the team and
    # serves every lookup by team; one index fewer on each trace's insert and analysis.
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    trace_id = models.BinaryField(max_length=16)
    state = models.PositiveSmallIntegerField(choices=TraceState.choices, default=TraceState.OPEN)
    first_seen_at = models.DateTimeField()
    last_span_at = models.DateTimeField()
    span_count = models.PositiveIntegerField(default=0)
    # Spans refused because the trace was full (INGEST_MAX_SPANS_PER_TRACE or
    # INGEST_MAX_TRACE_BYTES), and their bytes; defaults in the database too, since the
    # drain creates traces in SQL of its own.
    spans_dropped = models.PositiveIntegerField(default=0, db_default=0)
    bytes_dropped = models.BigIntegerField(default=0, db_default=0)
    # The size of its spans' names, attributes and events, about, as a reader holds them
    # (uncompressed): what one analysis pass or one page may load is bounded by it.
    byte_count = models.BigIntegerField(default=0, db_default=0)
    # The span table is partitioned by span start: these bound the partitions that hold
    # the trace's spans, so reading them back probes a day or two, not every day kept.
    first_span_start_ns = models.BigIntegerField(null=True, blank=True)
    last_span_start_ns = models.BigIntegerField(null=True, blank=True)

    root_span_id = models.BinaryField(max_length=8, null=True, blank=True)
    root_name = models.CharField(max_length=500, blank=True)
    root_service = models.CharField(max_length=200, blank=True)
    start_ns = models.BigIntegerField(null=True, blank=True)
    end_ns = models.BigIntegerField(null=True, blank=True)
    pipeline = models.ForeignKey(
        Pipeline, null=True, blank=True, on_delete=models.SET_NULL, related_name="traces"
    )
    incomplete = models.BooleanField(default=False)
    error = models.BooleanField(default=False)
    untracked_critical_ns = models.BigIntegerField(default=0)
    finalized_at = models.DateTimeField(
        null=True, blank=True, help_text="When its derived data was last computed."
    )
    # The trace list's attribute and stage filters read this instead of spans and
    # samples: see ``apps.analysis.trace_search``. Null: analyzed before it was kept.
    search_hashes = ArrayField(
        models.BigIntegerField(),
        null=True,
        blank=True,
        help_text="Hashes of its spans' attribute pairs and of its stage times, by team.",
    )
    revision = models.PositiveIntegerField(
        default=0, help_text="How often its derived data was computed."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "trace_id"], name="trace_unique_team_trace_id")
        ]
        indexes = [
            models.Index(
                fields=["last_span_at"],
                name="trace_open_by_last_span",
                condition=models.Q(state=TraceState.OPEN),
            ),
            # Only analyzed traces know their start, and every query by start names a
            # range of it: an open trace is not indexed until it has one.
            models.Index(
                fields=["team", "pipeline", "start_ns"],
                name="trace_team_pipeline_start",
                condition=models.Q(start_ns__isnull=False),
            ),
            models.Index(
                fields=["team", "start_ns"],
                name="trace_team_start",
                condition=models.Q(start_ns__isnull=False),
            ),
            # The list's orders by duration, as ``apps.ingest.selectors.traces`` writes it.
            models.Index(
                F("team"),
                F("end_ns") - F("start_ns"),
                name="trace_team_duration",
                condition=models.Q(start_ns__isnull=False),
            ),
            # Failed and incomplete traces, which may be rare, in both orders.
            models.Index(
                fields=["team", "start_ns"],
                name="trace_trouble_start",
                condition=TROUBLE,
            ),
            models.Index(
                F("team"),
                F("end_ns") - F("start_ns"),
                name="trace_trouble_duration",
                condition=TROUBLE,
            ),
            # The GIN index on ``search_hashes`` is the span store's to keep or drop:
            # see ``apps.ingest.services.search_index``.
        ]

    def __str__(self) -> str:
        return bytes(self.trace_id).hex()

    def state_label(self, now: datetime) -> str:
        """The state users see: a settled trace is final once it has been idle long enough."""
        idle = now - timedelta(seconds=settings.TRACE_IDLE_SECONDS)
        if self.state == TraceState.SETTLED and self.last_span_at <= idle:
            return TraceState.FINALIZED.label
        return str(TraceState(self.state).label)

    @property
    def full_of(self) -> str:
        """Which per-trace limit refused its spans: "spans" or "bytes" ("" when none did)."""
        if not self.spans_dropped:
            return ""
        return "spans" if self.span_count >= settings.INGEST_MAX_SPANS_PER_TRACE else "bytes"

    @property
    def duration_ns(self) -> int | None:
        if self.start_ns is None or self.end_ns is None:
            return None
        return max(0, self.end_ns - self.start_ns)


class SpanKindCode(models.IntegerChoices):
    UNSPECIFIED = 0, "unspecified"
    INTERNAL = 1, "internal"
    SERVER = 2, "server"
    CLIENT = 3, "client"
    PRODUCER = 4, "producer"
    CONSUMER = 5, "consumer"


class StatusCode(models.IntegerChoices):
    UNSET = 0, "unset"
    OK = 1, "ok"
    ERROR = 2, "error"


class Span(models.Model):
    """One stored span. Created by the ingest worker with COPY, never through the ORM."""

    pk = models.CompositePrimaryKey("trace_pk", "span_id", "start_ns")
    trace_pk = models.BigIntegerField()
    span_id = models.BinaryField(max_length=8)
    start_ns = models.BigIntegerField()
    team_id = models.BigIntegerField()
    trace_id = models.BinaryField(max_length=16)
    parent_span_id = models.BinaryField(max_length=8, null=True)
    name = models.TextField()
    service = models.TextField()
    kind = models.PositiveSmallIntegerField(choices=SpanKindCode.choices)
    end_ns = models.BigIntegerField()
    status = models.PositiveSmallIntegerField(choices=StatusCode.choices)
    status_message = models.TextField(blank=True)
    scope_name = models.TextField(blank=True)
    attributes = models.JSONField(default=dict)
    events = models.JSONField(default=list)
    received_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} ({bytes(self.span_id).hex()})"
