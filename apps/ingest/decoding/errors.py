"""Errors raised while turning a request body into span records.

Each carries a short message meant for the client (a ``google.rpc.Status`` message
or an API error body). The endpoint maps ``BodyTooLarge`` to 413, ``UnsupportedMediaType``
to 415 and every ``DecodeError`` to 400.
"""


class IngestError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DecodeError(IngestError):
    """The body cannot be decoded at all; no span from it is accepted."""


class BadEncoding(DecodeError):
    """The Content-Encoding is unsupported or the compressed stream is corrupt."""


class BodyTooLarge(IngestError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"request body exceeds {limit} bytes after decompression")
        self.limit = limit


class UnsupportedMediaType(IngestError):
    """The Content-Type names no format we decode, or too many Content-Encodings are stacked."""
