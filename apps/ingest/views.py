"""OTLP/HTTP trace export: ``POST /v1/traces``.

A plain Django view: exporters post every few seconds from every process, so
the path does the least it can. Checks run cheapest first, and the body is only
read once the request is known to be authorized and small enough.
"""

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from apps.ingest.auth import Unauthenticated, ingest_token_for_request
from apps.ingest.decoding import (
    RpcCode,
    UnsupportedMediaType,
    export_response_json,
    export_response_protobuf,
    otlp_encoding,
    status_json,
    status_protobuf,
)
from apps.ingest.models import Encoding
from apps.ingest.services.intake import (
    Refusal,
    backlog_check,
    batch_accept,
    body_length_check,
    body_read,
    database_errors_refused,
)

_RPC_CODES = {
    400: RpcCode.INVALID_ARGUMENT,
    401: RpcCode.UNAUTHENTICATED,
    405: RpcCode.UNIMPLEMENTED,
    413: RpcCode.RESOURCE_EXHAUSTED,
    415: RpcCode.UNIMPLEMENTED,
    429: RpcCode.RESOURCE_EXHAUSTED,
    503: RpcCode.UNAVAILABLE,
}
_JSON = "application/json"


@csrf_exempt
def otlp_traces(request: HttpRequest) -> HttpResponse:
    content_type = request.META.get("CONTENT_TYPE")
    unsupported: UnsupportedMediaType | None = None
    try:
        encoding = otlp_encoding(content_type)
    except UnsupportedMediaType as exc:
        encoding, unsupported = "json", exc  # errors about other types are written in JSON
    protobuf = encoding == "protobuf"
    if request.method != "POST":
        response = _status(Refusal(405, "method_not_allowed", "send spans with POST"), protobuf)
        response["Allow"] = "POST"
        return response
    if unsupported is not None:
        return _status(Refusal(415, "unsupported_media_type", unsupported.message), protobuf)
    try:
        body_length_check(request.META)
        with database_errors_refused():
            token = ingest_token_for_request(request)
            backlog_check(team=token.team)
            result = batch_accept(
                token=token,
                body=body_read(request),
                content_encoding=request.META.get("HTTP_CONTENT_ENCODING"),
                encoding=Encoding.OTLP_PROTOBUF if protobuf else Encoding.OTLP_JSON,
            )
    except Unauthenticated as exc:
        response = _status(Refusal(401, "not_authenticated", exc.message), protobuf)
        response["WWW-Authenticate"] = "Bearer"
        return response
    except Refusal as refusal:
        return _status(refusal, protobuf)
    export = export_response_protobuf if protobuf else export_response_json
    body = export(rejected_spans=result.rejected, error_message=result.error_message)
    # OTLP answers in the media type it was sent, application/protobuf included.
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    return HttpResponse(body, content_type=media_type)


def _status(refusal: Refusal, protobuf: bool) -> HttpResponse:
    code = _RPC_CODES.get(refusal.status, RpcCode.INTERNAL)
    if protobuf:
        response = HttpResponse(
            status_protobuf(code, refusal.message),
            status=refusal.status,
            content_type="application/x-protobuf",
        )
    else:
        response = HttpResponse(
            status_json(code, refusal.message), status=refusal.status, content_type=_JSON
        )
    if refusal.retry_after:
        response["Retry-After"] = str(refusal.retry_after)
    return response
