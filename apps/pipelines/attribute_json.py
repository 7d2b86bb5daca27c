"""JSON for attribute equalities, written so that jsonb gives back the same values.

PostgreSQL keeps a jsonb number as ``numeric``, which has no exponent and no negative
zero: ``1e+16`` (how Python writes a large double) comes back as the integer
``10000000000000000``, and ``-0.0`` as ``0.0``. A rule's ``1e16`` would then stop
matching a span's double, and a configuration file would show a change on every plan.
Written positionally with a fraction, a double reads back as the same double.
"""

import json
import math
from decimal import Decimal
from typing import Any

# From here on Python's repr of a double switches to an exponent; every double this
# large is a whole number.
_EXPONENT_FROM = 1e16


def attribute_number(value: float) -> str:
    """A finite double as JSON text that jsonb reads back as the same double."""
    if value == 0:
        return "0.0"
    if abs(value) >= _EXPONENT_FROM:
        return f"{Decimal(repr(value)):f}.0"
    return repr(value)


def canonical_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """The mapping as it reads back from jsonb: negative zero is zero."""
    return {
        key: 0.0 if isinstance(value, float) and value == 0 else value
        for key, value in attributes.items()
    }


class AttributeJSONEncoder(json.JSONEncoder):
    """Encodes the flat mappings of ``validate_attributes``; anything else as usual."""

    def encode(self, o: Any) -> str:
        if not isinstance(o, dict) or not all(_scalar(item) for item in o.values()):
            return super().encode(o)
        items = (
            f"{json.dumps(str(key), ensure_ascii=self.ensure_ascii)}:{_encoded(item, self)}"
            for key, item in o.items()
        )
        return "{" + ",".join(items) + "}"


def _scalar(item: Any) -> bool:
    return item is None or isinstance(item, str | int | float)


def _encoded(item: Any, encoder: json.JSONEncoder) -> str:
    if isinstance(item, float) and math.isfinite(item):
        return attribute_number(item)
    return json.JSONEncoder.encode(encoder, item)
