"""The native body: the payload itself (documented in docs/alerts.md), as compact JSON."""

import json

from apps.alerts.models import Channel
from apps.alerts.payload_types import Payload

CONTENT_TYPE = "application/json"


def render(channel: Channel, payload: Payload) -> tuple[bytes, str]:
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return body.encode("utf-8"), CONTENT_TYPE
