"""Standard Webhooks signatures (standardwebhooks.com), so receivers can use its libraries.

A secret is "whsec_" and the base64 of random bytes; the signature is
``v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">`` keyed with those
bytes. The id stays the same on every retry of a message (receivers deduplicate on it);
the timestamp is the attempt's (receivers refuse stale ones, against replays).
"""

import base64
import binascii
import hashlib
import hmac
import secrets

PREFIX = "whsec_"
SECRET_BYTES = 32
# The specification asks for 24 to 64 bytes of key.
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64


def secret_generate() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(PREFIX), validate=True)


def secret_is_valid(secret: str) -> bool:
    if not secret.startswith(PREFIX):
        return False
    try:
        return MIN_SECRET_BYTES <= len(_key(secret)) <= MAX_SECRET_BYTES
    except (binascii.Error, ValueError):
        return False


def signature(*, secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64>``; raises ValueError for a secret that is not "whsec_" and base64."""
    try:
        key = _key(secret)
    except binascii.Error as exc:
        raise ValueError("the signing secret is not “whsec_” followed by base64") from exc
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signature_headers(
    *, secret: str, message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers; without a secret, the id and timestamp only."""
    headers = {"webhook-id": message_id, "webhook-timestamp": str(timestamp)}
    if secret:
        headers["webhook-signature"] = signature(
            secret=secret, message_id=message_id, timestamp=timestamp, body=body
        )
    return headers
