"""Our Standard Webhooks signatures, checked by the specification's own library."""

import base64
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.alerts.transports.signing import secret_generate, secret_is_valid, signature_headers

BODY = b'{"type":"alert.firing","observed_ms":812.4}'


def _headers(secret: str, body: bytes = BODY, message_id: str = "msg_1") -> dict[str, str]:
    return signature_headers(
        secret=secret, message_id=message_id, timestamp=int(time.time()), body=body
    )


def test_a_generated_secret_is_whsec_and_32_random_bytes() -> None:
    secret = secret_generate()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert secret_is_valid(secret)
    assert secret_generate() != secret


@pytest.mark.parametrize(
    "secret",
    [
        "",
        "whsec_",
        "whsec_not base64!",
        "whsec_" + base64.b64encode(b"x" * 16).decode(),  # too short
        base64.b64encode(b"x" * 32).decode(),  # no prefix
    ],
)
def test_a_malformed_secret_is_not_valid(secret: str) -> None:
    assert not secret_is_valid(secret)


def test_the_signature_verifies_with_the_standard_webhooks_library() -> None:
    secret = secret_generate()
    headers = _headers(secret)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(BODY, headers) == {
        "type": "alert.firing",
        "observed_ms": 812.4,
    }


def test_another_secret_does_not_verify() -> None:
    headers = _headers(secret_generate())
    with pytest.raises(WebhookVerificationError):
        Webhook(secret_generate()).verify(BODY, headers)


def test_a_changed_body_does_not_verify() -> None:
    secret = secret_generate()
    headers = _headers(secret)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace(b"812.4", b"12.4"), headers)


def test_a_changed_message_id_does_not_verify() -> None:
    secret = secret_generate()
    headers = {**_headers(secret), "webhook-id": "msg_2"}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, headers)


def test_without_a_secret_the_id_and_timestamp_are_still_sent() -> None:
    headers = signature_headers(secret="", message_id="msg_1", timestamp=1700000000, body=BODY)
    assert headers == {"webhook-id": "msg_1", "webhook-timestamp": "1700000000"}


def test_a_non_ascii_body_is_signed_as_its_utf8_bytes() -> None:
    secret = secret_generate()
    body = '{"name":"Récupération · étape"}'.encode()
    assert Webhook(secret).verify(body, _headers(secret, body)) == {"name": "Récupération · étape"}
