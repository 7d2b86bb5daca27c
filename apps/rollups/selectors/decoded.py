"""Decoded rollup sketches, kept per process in a small LRU.

Dashboards ask for the same windows over and over, and all but the newest
buckets stay unchanged between requests; decoding is most of a cold query's
cost. The key is the stored bytes themselves, so a recomputed bucket can never
be answered from a stale entry, whatever way its row was rewritten. Cached
sketches are shared: callers merge them into new ones and never change them.
"""

import threading
from collections import OrderedDict

from apps.rollups.sketch import Sketch

# An entry (a sketch of a few hundred samples, and its bytes) takes about 2 KB: at
# most some 40 MB per process, several pipelines' 30-day views (6,000 rows each).
MAX_ENTRIES = 20_000

_cache: OrderedDict[bytes, Sketch] = OrderedDict()
_lock = threading.Lock()


def decoded_sketch(data: bytes | memoryview) -> Sketch:
    key = bytes(data)
    with _lock:
        sketch = _cache.get(key)
        if sketch is not None:
            _cache.move_to_end(key)
            return sketch
    sketch = Sketch.from_bytes(key)
    with _lock:
        _cache[key] = sketch
        if len(_cache) > MAX_ENTRIES:
            _cache.popitem(last=False)
    return sketch


def decoded_sketches_clear() -> None:
    with _lock:
        _cache.clear()
