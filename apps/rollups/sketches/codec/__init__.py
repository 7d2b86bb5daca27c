"""A latency sketch's stored bytes: the layout (``layout``), written by ``encode``
(``write``), read one blob at a time by ``decode`` (``read_one``: every field checked,
the reference) and many at once by ``decode_many`` (``read_many``: the same checks for
a whole batch, in a few numpy operations)."""

from apps.rollups.sketches.codec.layout import SketchParts
from apps.rollups.sketches.codec.read_many import BatchParts, decode_many
from apps.rollups.sketches.codec.read_one import decode
from apps.rollups.sketches.codec.write import encode

__all__ = ["BatchParts", "SketchParts", "decode", "decode_many", "encode"]
