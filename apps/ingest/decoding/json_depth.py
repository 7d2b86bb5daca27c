"""A nesting limit for JSON bodies, checked on the bytes before a decoder sees them.

msgspec recurses once per level and stops only at the interpreter's recursion
limit, with a RecursionError, and the attribute flattening after it recurses
too. No span format needs more than a few dozen levels.
"""

import numpy as np

from apps.ingest.decoding.errors import DecodeError

MAX_JSON_DEPTH = 64

_KEPT = b'"[]{}'
_DROPPED = bytes(sorted(set(range(256)) - set(_KEPT)))
_STEP = np.zeros(256, dtype=np.int8)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1
_QUOTE = ord('"')
# Bounds the temporary arrays whatever the body's size.
_CHUNK = 1 << 20


def json_depth_check(body: bytes) -> None:
    """Raise DecodeError when arrays and objects nest deeper than MAX_JSON_DEPTH.

    Exact for valid JSON; for invalid JSON exact up to its first syntax error, which
    is as far as a decoder gets before it gives up.
    """
    if b"\\" in body:
        # Escaped backslashes go before escaped quotes, so every quote left opens or
        # closes a string.
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Adjacent quotes enclose no bracket (or leave none between two strings).
    structure = body.translate(None, _DROPPED).replace(b'""', b"")
    if len(structure) <= MAX_JSON_DEPTH:
        return
    depth = 0
    in_string = False
    for start in range(0, len(structure), _CHUNK):
        chars = np.frombuffer(
            structure, dtype=np.uint8, count=min(_CHUNK, len(structure) - start), offset=start
        )
        inside = np.bitwise_xor.accumulate(chars == _QUOTE)
        if in_string:
            inside = ~inside
        steps = _STEP[chars]
        steps[inside] = 0
        levels = np.cumsum(steps, dtype=np.int32)  # a chunk cannot overflow it
        if depth + int(levels.max()) > MAX_JSON_DEPTH:
            raise DecodeError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        depth += int(levels[-1])
        in_string = bool(inside[-1])
