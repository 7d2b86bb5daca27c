"""Unsigned LEB128 varints, as protobuf and the stored sketches write integers."""


def varint(value: int) -> bytes:
    """``value`` (not negative) in 7-bit groups, low first, the high bit set on all but
    the last byte."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
