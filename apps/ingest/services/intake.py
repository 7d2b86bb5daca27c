"""The request path of ingestion: read a body, decode it, admit it, commit it.

Shared by the OTLP and native endpoints, which differ only in how they answer.
Whatever is refused is refused before anything is written.
"""

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from django.conf import settings
from django.db import InterfaceError, InternalError, OperationalError, transaction

from apps.core.isolation import is_transient
from apps.ingest.decoding import (
    BodyTooLarge,
    DecodeError,
    DecodeResult,
    UnsupportedMediaType,
    decode_body,
)
from apps.ingest.models import Encoding
from apps.ingest.quota import daily_bytes_consume, daily_bytes_refund, daily_bytes_wait
from apps.ingest.ratelimit import (
    BACKLOG_RETRY_AFTER_S,
    backlog_full,
    rate_limit_consume,
    rate_limit_refund,
    rate_limit_wait,
)
from apps.ingest.services.batches import DECODERS, accepted_batch_store
from apps.ingest.services.span_rows import span_row
from apps.ingest.services.trace_limits import trace_limits_apply, trace_refusals_count
from apps.ingest.tasks import drain_schedule
from apps.teams.accounts import account_of
from apps.teams.models import IngestToken, Team

DATABASE_RETRY_AFTER_S = 10


class Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


class Refusal(Exception):
    """A request refused as a whole; ``code`` names the reason in the REST API's error body."""

    def __init__(
        self, status: int, code: str, message: str, *, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


def body_length_check(meta: Mapping[str, Any]) -> None:
    """Refuse a declared Content-Length over the cap before reading a byte."""
    declared = meta.get("CONTENT_LENGTH") or ""
    try:
        length = int(declared) if declared else 0
    except ValueError:
        raise Refusal(400, "invalid_body", "invalid Content-Length") from None
    if length > settings.INGEST_MAX_BODY_BYTES:
        raise _too_large_as_sent()


def body_read(stream: Readable) -> bytes:
    """The body as sent, never reading more than the cap plus one byte."""
    cap = settings.INGEST_MAX_BODY_BYTES
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        try:
            chunk = stream.read(cap + 1 - size)
        except OSError:  # the client went away mid-body (Django's UnreadablePostError)
            raise Refusal(400, "invalid_body", "the request body was cut short") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > cap:
        raise _too_large_as_sent()
    return b"".join(chunks)


def _too_large_as_sent() -> Refusal:
    return Refusal(
        413,
        "request_too_large",
        f"request body exceeds {settings.INGEST_MAX_BODY_BYTES} bytes as sent",
    )


def backlog_check(*, team: Team) -> None:
    if backlog_full(account_key=account_of(team=team).key):
        raise Refusal(
            503,
            "unavailable",
            "too many of this account's spans are waiting to be stored; retry later",
            retry_after=BACKLOG_RETRY_AFTER_S,
        )


def database_unavailable() -> Refusal:
    return Refusal(
        503,
        "unavailable",
        "the database is unavailable; retry later",
        retry_after=DATABASE_RETRY_AFTER_S,
    )


@contextmanager
def database_errors_refused() -> Iterator[None]:
    """A database that is down, unreachable or refusing writes is a retryable 503, not a 500."""
    try:
        yield
    except (OperationalError, InterfaceError):
        raise database_unavailable() from None
    except InternalError as exc:
        # A demoted primary or a storage guard refuses every write: nobody's request is
        # at fault, and the client must keep its spans and come back.
        if is_transient(exc):
            raise database_unavailable() from None
        raise


def batch_accept(
    *, token: IngestToken, body: bytes, content_encoding: str | None, encoding: Encoding
) -> DecodeResult:
    """Decode a body and commit it as a raw batch; returns what was accepted and rejected.

    What is stored is already decoded, as the rows the drain copies in, so workers never
    do that work again. Spans their trace has no room for are rejected one by one; a
    body whose spans were all rejected stores nothing. An account whose rate window or
    daily quota is used up is refused before its body costs any decompression.
    """
    account_key = account_of(team=token.team).key
    _throttle(rate_limit_wait(account_key=account_key))
    _over_quota(daily_bytes_wait(account_key=account_key))
    try:
        raw = decode_body(body, content_encoding, max_size=settings.INGEST_MAX_DECOMPRESSED_BYTES)
        result = DECODERS[encoding](raw)
    except BodyTooLarge as exc:
        raise Refusal(413, "request_too_large", exc.message) from None
    except UnsupportedMediaType as exc:
        raise Refusal(415, "unsupported_media_type", exc.message) from None
    except DecodeError as exc:
        raise Refusal(400, "invalid_body", exc.message) from None
    if not result.spans:
        return result
    cut = trace_limits_apply(
        team_id=token.team_id,
        decoded=result,
        rows=[span_row(token.team_id, span) for span in result.spans],
    )
    result = cut.decoded
    spans, size, now = len(result.spans), sum(map(len, cut.rows)), time.time()
    _throttle(rate_limit_consume(account_key=account_key, spans=spans, now=now))
    wait = daily_bytes_consume(account_key=account_key, size=size, now=now)
    if wait:
        rate_limit_refund(account_key=account_key, spans=spans, now=now)
        _over_quota(wait)
    if not (spans or cut.refused):
        return result
    try:
        with transaction.atomic():
            if spans:
                accepted_batch_store(team=token.team, token=token, decoded=result, rows=cut.rows)
                # Robust: the batch is committed either way, and the periodic drain takes it.
                transaction.on_commit(drain_schedule, robust=True)
            trace_refusals_count(refused=cut.refused)
    except Exception:
        # Not stored: the spans and bytes were not used.
        rate_limit_refund(account_key=account_key, spans=spans, now=now)
        daily_bytes_refund(account_key=account_key, size=size, now=now)
        raise
    return result


def _throttle(retry_after: int) -> None:
    if retry_after:
        per_second = settings.INGEST_RATE_LIMIT_SPANS
        raise Refusal(
            429,
            "throttled",
            f"this account is over its limit of {per_second} spans per second",
            retry_after=retry_after,
        )


def _over_quota(retry_after: int) -> None:
    if retry_after:
        quota = settings.INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY
        raise Refusal(
            429,
            "quota_exceeded",
            f"this account has used its daily quota of {quota} bytes of stored spans "
            "(INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY); it is renewed at 00:00 UTC",
            retry_after=retry_after,
        )
