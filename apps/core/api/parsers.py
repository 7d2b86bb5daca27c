import io
from collections.abc import Mapping
from typing import IO, Any

from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.parsers import JSONParser

# Configuration payloads are small; DRF reads the body stream itself, so Django's
# DATA_UPLOAD_MAX_MEMORY_SIZE does not guard it.
MAX_BODY_BYTES = 1024 * 1024


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"
    default_detail = f"The request body is larger than {MAX_BODY_BYTES} bytes."


class BoundedJSONParser(JSONParser):
    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        body = stream.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            raise RequestTooLarge()
        return super().parse(io.BytesIO(body), media_type, parser_context)
