"""Raw batches: committed by the request path, drained into spans by the ingest queue."""

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone

from apps.core.binary_sql import server_bound_cursor
from apps.core.isolated_pass import Candidate, IsolatedPass, pass_run
from apps.core.isolation import failure_reason
from apps.core.models import QuarantineKind
from apps.core.quarantine import quarantine_record
from apps.ingest.decoding.errors import DecodeError
from apps.ingest.decoding.native_json import decode_native_json
from apps.ingest.decoding.otlp_json import decode_otlp_json
from apps.ingest.decoding.otlp_protobuf import decode_otlp_protobuf
from apps.ingest.decoding.records import DecodeResult
from apps.ingest.models import Encoding, RawBatch
from apps.ingest.services.span_rows import span_rows
from apps.ingest.span_store import WriteResult, span_store
from apps.teams.accounts import account_key_for
from apps.teams.models import IngestToken, Team

logger = logging.getLogger(__name__)

# Keyed by the stored integer: Encoding members are ints and look up the same.
DECODERS: dict[int, Callable[[bytes], DecodeResult]] = {
    Encoding.OTLP_PROTOBUF: decode_otlp_protobuf,
    Encoding.OTLP_JSON: decode_otlp_json,
    Encoding.NATIVE_JSON: decode_native_json,
}


def raw_batch_store(
    *, team: Team, token: IngestToken | None, encoding: int, body: bytes, span_count: int
) -> RawBatch:
    """Commit an accepted request body; the caller answers 2xx only after this returns."""
    batch = RawBatch(
        team=team,
        token=token,
        encoding=encoding,
        body=body,
        span_count=span_count,
        received_at=timezone.now(),
    )
    with server_bound_cursor() as cursor:  # the body as a binary parameter, not hex text
        cursor.execute(
            f"INSERT INTO {RawBatch._meta.db_table} (team_id, token_id, encoding, body, "
            "span_count, "
            "received_at, attempts, last_error) VALUES (%s, %s, %s, %b, %s, %s, 0, '') "
            "RETURNING id",
            [team.pk, token.pk if token else None, encoding, body, span_count, batch.received_at],
        )
        row = cursor.fetchone()
    assert row is not None
    batch.pk = row[0]
    batch._state.adding = False
    batch._state.db = connection.alias
    return batch


def accepted_batch_store(
    *,
    team: Team,
    token: IngestToken | None,
    decoded: DecodeResult,
    rows: Sequence[bytes] | None = None,
) -> RawBatch:
    """Commit the accepted spans of a request, in the form the worker stores fastest.

    That is the spans as COPY rows, written from the decoding the request already
    did (``rows``, one per span, when the caller has them); the worker copies them in
    without decoding again.
    """
    body = span_rows(team.pk, decoded.spans) if rows is None else b"".join(rows)
    count = len(decoded.spans)
    return raw_batch_store(
        team=team, token=token, encoding=Encoding.SPAN_ROWS, body=body, span_count=count
    )


def raw_batches_pending() -> bool:
    return RawBatch.objects.filter(last_error="").exists()


def raw_backlog_spans_by_account() -> dict[str, int]:
    """Spans waiting to be stored, per account (``Account.key``) that has any
    (quarantined batches included: they are a team's to release or discard, and they
    hold space all the same)."""
    rows = RawBatch.objects.values("team_id", "team__account_id").annotate(total=Sum("span_count"))
    backlog: dict[str, int] = {}
    for row in rows:
        key = account_key_for(team_id=row["team_id"], account_id=row["team__account_id"])
        backlog[key] = backlog.get(key, 0) + int(row["total"] or 0)
    return backlog


@dataclass
class DrainResult:
    batches: int = 0
    spans_received: int = 0
    spans_new: int = 0
    traces_touched: int = 0
    failed_batches: int = 0
    # Batches once suspected of killing a drain, found stored or set aside since.
    suspects_cleared: int = 0

    @property
    def more(self) -> bool:
        return self.batches + self.failed_batches + self.suspects_cleared > 0


def _bodies(pks: list[int]) -> dict[int, bytes]:
    with server_bound_cursor() as cursor:  # bodies in binary, not as hex text
        cursor.execute(
            f"SELECT id, body FROM {RawBatch._meta.db_table} WHERE id = ANY(%s)",
            [pks],
            binary=True,
        )
        return dict(cursor.fetchall())


def _decode(batch: RawBatch) -> DecodeResult:
    decoder = DECODERS.get(batch.encoding)
    if decoder is None:
        raise DecodeError(f"batches encoded as {batch.encoding} cannot be stored here")
    return decoder(bytes(batch.body))


# A batch ready to store: its spans as COPY rows.
Ready = tuple[RawBatch, bytes]


class RawBatchDrain(IsolatedPass[RawBatch, Ready, tuple[Sequence[Ready], WriteResult]]):
    """The oldest pending batches, up to the spans and bytes one drain may load.

    The bodies' sizes come from their headers (octet_length reads no TOASTed body),
    so a drain loads at most ``max_bytes`` of them, whatever their spans count says;
    a batch larger than that is drained alone rather than never.
    """

    kind = QuarantineKind.RAW_BATCH

    def __init__(self, *, max_spans: int, max_bytes: int) -> None:
        self.max_spans = max_spans
        self.max_bytes = max_bytes

    def waiting(self) -> QuerySet[RawBatch]:
        return RawBatch.objects.filter(last_error="").order_by("id").defer("body")

    def candidates(self, due: QuerySet[Any]) -> Iterable[Candidate]:
        sized = due.annotate(size=RawSQL("octet_length(body)", ()))
        return sized.values_list("id", "span_count", "size")[: self.max_items]

    def begin(self, items: list[RawBatch]) -> list[RawBatch]:
        bodies = _bodies([b.pk for b in items])
        for batch in items:
            batch.body = bodies[batch.pk]
        return items

    def work(self, item: RawBatch) -> Ready:
        if item.encoding == Encoding.SPAN_ROWS:
            return item, bytes(item.body)
        # Accepted bodies were decoded once already; one that fails now is kept out of
        # the way with its error rather than blocking the queue.
        return item, span_rows(item.team_id, _decode(item).spans)

    def write(self, group: Sequence[Ready]) -> tuple[Sequence[Ready], WriteResult]:
        written = span_store().spans_write([(batch.pk, payload) for batch, payload in group])
        RawBatch.objects.filter(pk__in=[batch.pk for batch, _ in group]).delete()
        return group, written

    def item_of(self, done: Ready) -> RawBatch:
        return done[0]

    def quarantine(self, item: RawBatch, reason: BaseException) -> None:
        _batch_quarantine(item, reason)


def raw_batches_drain(*, max_spans: int | None = None, max_bytes: int | None = None) -> DrainResult:
    """Store the spans of the oldest pending batches, coalesced into one write.

    Runs in one transaction: the batches are locked (others skip them), their
    spans written, and the batches deleted. A crash anywhere rolls everything
    back and leaves the batches pending, so the work is simply done again; span
    inserts ignore (trace, span id) pairs already stored, so nothing counts twice.
    A batch that cannot be decoded or stored is quarantined (kept with its error,
    out of later drains) and the others are stored without it. A batch that was in
    a drain whose worker died is drained alone, and quarantined once its drains have
    died ``PASS_CRASH_STRIKES`` times (see ``apps.core.isolated_pass``).
    """
    drain = RawBatchDrain(
        max_spans=max_spans or settings.INGEST_DRAIN_MAX_SPANS,
        max_bytes=max_bytes or settings.INGEST_DRAIN_MAX_BYTES,
    )
    outcome = pass_run(drain)
    result = DrainResult(
        failed_batches=len(outcome.quarantined),
        spans_received=sum(batch.span_count for batch in outcome.quarantined),
        suspects_cleared=outcome.suspects_cleared,
    )
    for group, written in outcome.written:
        result.batches += len(group)
        result.spans_received += sum(batch.span_count for batch, _ in group)
        result.spans_new += written.spans_new
        result.traces_touched += written.traces_touched
    return result


def _batch_quarantine(batch: RawBatch, exc: BaseException) -> None:
    reason = failure_reason(exc) if not isinstance(exc, DecodeError) else str(exc)
    logger.error("raw batch %s quarantined: %s", batch.pk, reason)
    RawBatch.objects.filter(pk=batch.pk).update(
        attempts=batch.attempts + 1, last_error=reason[:2000]
    )
    quarantine_record(
        kind=QuarantineKind.RAW_BATCH, item_id=batch.pk, team_id=batch.team_id, reason=reason
    )


def raw_batches_release(batch_ids: list[int]) -> int:
    """Put quarantined batches back into the drain."""
    return RawBatch.objects.filter(pk__in=batch_ids).exclude(last_error="").update(last_error="")
