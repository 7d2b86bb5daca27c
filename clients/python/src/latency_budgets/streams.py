"""Which chunks of a stream are content: a keep-alive is not a first token."""

from typing import Any


def is_content_chunk(chunk: Any) -> bool:
    """False for an empty or blank ``bytes``/``str`` and for Server-Sent Events comments
    (every line starting with ``:``); True for any other object."""
    if isinstance(chunk, bytes | bytearray | memoryview):
        text = bytes(chunk).decode("utf-8", "replace")
    elif isinstance(chunk, str):
        text = chunk
    else:
        return True
    lines = [line for line in text.splitlines() if line.strip()]
    return any(not line.startswith(":") for line in lines)
