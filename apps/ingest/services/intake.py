"""The request path of ingestion: read a body, decode it, admit it, commit it.

Shared by the OTLP and native endpoints, which differ only in how they answer.
Whatever is refused is refused before anything is written.
"""

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
from apps.ingest.ratelimit import (
    BACKLOG_RETRY_AFTER_S,
    backlog_full,
    rate_limit_consume,
    rate_limit_wait,
)
from apps.ingest.services.batches import DECODERS, accepted_batch_store
from apps.ingest.tasks import drain_schedule
from apps.teams.models import IngestToken

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


def backlog_check(*, team_id: int) -> None:
    if backlog_full(team_id=team_id):
        raise Refusal(
            503,
            "unavailable",
            "too many of this team's spans are waiting to be stored; retry later",
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

    What is stored is already decoded (or at least decompressed), so workers never
    do that work again. A body whose spans were all rejected stores nothing. A token
    whose window is used up is refused before its body costs any decompression.
    """
    _throttle(rate_limit_wait(team_id=token.team_id))
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
    _throttle(rate_limit_consume(team_id=token.team_id, spans=len(result.spans)))
    with transaction.atomic():
        accepted_batch_store(team=token.team, token=token, decoded=result)
        # Robust: the batch is committed either way, and the periodic drain picks it up.
        transaction.on_commit(drain_schedule, robust=True)
    return result


def _throttle(retry_after: int) -> None:
    if retry_after:
        per_second = settings.INGEST_RATE_LIMIT_SPANS
        raise Refusal(
            429,
            "throttled",
            f"this team is over its limit of {per_second} spans per second",
            retry_after=retry_after,
        )
