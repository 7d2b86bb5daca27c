"""Native span ingestion: ``POST /api/v1/spans``, for clients without OpenTelemetry.

A DRF view so that it sits in the OpenAPI schema and answers in the API's error
shape; the body is handed over as bytes and decoded by msgspec, never by a
serializer. Its serializers, in apps.ingest.apis.serializers, only describe the
format for the schema.
"""

from typing import Any

from django.db import InterfaceError, OperationalError
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.schema import ErrorSerializer
from apps.ingest.apis.serializers import NativeBatchSerializer
from apps.ingest.auth import HasIngestToken, IngestTokenAuthentication, request_ingest_token
from apps.ingest.decoding.body import MAX_CONTENT_CODINGS, MAX_GZIP_MEMBERS
from apps.ingest.decoding.json_depth import MAX_JSON_DEPTH
from apps.ingest.models import Encoding
from apps.ingest.services.intake import (
    Refusal,
    backlog_check,
    batch_accept,
    body_length_check,
    body_read,
    database_unavailable,
)
from apps.teams.tokens import INGEST_TOKEN_PREFIX


class IngestTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.ingest.auth.IngestTokenAuthentication"
    name = "ingestToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": (
                f"A team ingest token ({INGEST_TOKEN_PREFIX}…), created under Ingest tokens "
                "in the web app. It can only send spans."
            ),
        }


class RawJsonParser(BaseParser):
    """The body as bytes, read within INGEST_MAX_BODY_BYTES."""

    media_type = "application/json"

    def parse(  # type: ignore[override]  # bytes, by design
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> bytes:
        return body_read(stream)


class Refused(exceptions.APIException):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message, refusal.code)
        self.status_code = refusal.status
        # DRF's exception handler turns ``wait`` into Retry-After.
        self.wait = refusal.retry_after


ERRORS = {
    400: "The body is not JSON or not a span batch (wrong types, missing fields, "
    f"nested deeper than {MAX_JSON_DEPTH} levels), or its compression is corrupt or has "
    f"more than {MAX_GZIP_MEMBERS} gzip members. Nothing was stored.",
    401: "Missing, unknown or revoked ingest token (personal API tokens are refused).",
    413: "The body is over the size limit, as sent or after decompression.",
    415: "The Content-Type is not application/json, or more than "
    f"{MAX_CONTENT_CODINGS} Content-Encodings are stacked.",
    429: "The account is over its span rate limit (code `throttled`) or has used its "
    "daily quota of stored bytes (code `quota_exceeded`, until 00:00 UTC); retry after "
    "`Retry-After` seconds.",
    503: "Too many of the account's spans are waiting to be stored, or the database is "
    "unavailable; retry after `Retry-After` seconds.",
}


class SpanBatchApi(APIView):
    authentication_classes = [IngestTokenAuthentication]
    permission_classes = [HasIngestToken]
    # Ingestion is admitted by its own limits (apps/ingest/ratelimit.py), per account.
    throttle_classes: list[type] = []
    parser_classes = [RawJsonParser]
    renderer_classes = [JSONRenderer]

    class OutputSerializer(serializers.Serializer):
        accepted = serializers.IntegerField(help_text="Spans stored.")
        rejected = serializers.IntegerField(help_text="Spans refused one by one.")
        # The body's key; DRF takes declared fields off the class, so the property is untouched.
        errors = serializers.ListField(  # type: ignore[assignment]
            child=serializers.CharField(),
            help_text=(
                "The first few rejected spans, then the first few attributes dropped from "
                "accepted spans, e.g. “span 3: empty name”, “span 0: dropped "
                "gen_ai.response.time_to_first_chunk: out of range (1e+300)”."
            ),
        )

        class Meta:
            ref_name = "SpanBatchResult"

    @extend_schema(
        summary="Send spans in the native JSON format",
        description=(
            "Spans of one or several traces. Invalid spans (bad ids, empty name, "
            "unreadable times, end before start, over a per-span limit, or of a trace "
            "at its span or byte limit) are rejected one by one and reported; over-long "
            "values are truncated and extra events dropped, as the OpenTelemetry SDK "
            "does. The rest are stored. A 200 means the batch is committed. 429: the "
            "account is over its span rate or its daily quota of stored bytes; 503: its "
            "backlog is full or the database is away (both with Retry-After)."
        ),
        request=NativeBatchSerializer,
        parameters=[
            OpenApiParameter(
                "Content-Encoding",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                enum=["gzip", "deflate", "identity"],
                description="Compression of the body.",
            )
        ],
        responses={
            200: OpenApiResponse(
                response=OutputSerializer,
                description="The batch is committed; rejected spans are counted and listed.",
            ),
            **{
                code: OpenApiResponse(response=ErrorSerializer, description=text)
                for code, text in ERRORS.items()
            },
        },
        tags=["ingestion"],
    )
    def post(self, request: Request) -> Response:
        # Checked before the backlog and the body; DRF would only check when parsing.
        media_type = request.content_type.split(";", 1)[0].strip().lower()
        if media_type != RawJsonParser.media_type:
            raise exceptions.UnsupportedMediaType(media_type or "(none)")
        body_length_check(request.META)
        token = request_ingest_token(request)
        backlog_check(team=token.team)
        body = request.data
        result = batch_accept(
            token=token,
            # DRF hands over {} instead of calling the parser for an empty body.
            body=body if isinstance(body, bytes) else b"",
            content_encoding=request.META.get("HTTP_CONTENT_ENCODING"),
            encoding=Encoding.NATIVE_JSON,
        )
        output = {
            "accepted": len(result.spans),
            "rejected": result.rejected,
            "errors": result.errors,
        }
        return Response(self.OutputSerializer(output).data)

    def handle_exception(self, exc: Exception) -> Response:
        # Authentication runs before post(), so database errors are caught here, not there.
        if isinstance(exc, OperationalError | InterfaceError):
            exc = database_unavailable()
        if isinstance(exc, Refusal):
            exc = Refused(exc)
        return super().handle_exception(exc)
