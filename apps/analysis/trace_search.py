"""A trace's search set: what the trace list filters on, as one compact set of hashes.

Analysis reads every span of a trace anyway; it keeps on the trace row
(``Trace.search_hashes``) one 64-bit hash per element, and a GIN index finds the traces
whose set contains the elements a filter asks for, without reading spans or samples:

- **attribute pairs**: each distinct (key, value) found on any span of the trace, the
  root included, and each span's service as ``service.name``. Values compare as span
  rules compare them (``attribute_text``): ``42``, ``42.0`` and ``"42"`` are one pair,
  ``true`` equals ``"true"``, other strings compare exactly; lists and maps are left
  out, and so are keys longer than ``ATTRIBUTE_KEY_MAX_CHARS`` and values longer than
  ``ATTRIBUTE_VALUE_MAX_CHARS``. Past ``ATTRIBUTE_MAX_PAIRS`` pairs the root's come
  first, then the other spans' in order of start.
- **stage marks**: per stage sample, the bucket of its wall time (quarter octaves, each
  about 19 % wide) and of its share of the critical path (5 % steps). A filter on a
  stage's wall time above its budget takes the traces marked in a bucket wholly above
  the budget as they are, and checks the trace's sample for those marked in the bucket
  that holds the budget; so the filter follows the budget as it is now, whatever it was
  when the trace was analyzed.

Every hash is keyed by the team: the same element has another hash in another team,
so no team's values share index entries with another's. 64 bits make a false match
about one in 10^17 per element compared.
"""

from collections.abc import Iterable
from functools import lru_cache
from hashlib import blake2b

from apps.analysis.spans import Span
from apps.analysis.stage_matching import attribute_text
from apps.core.time import NS_PER_DAY
from apps.ingest.models import (
    ATTRIBUTE_KEY_MAX_CHARS,
    ATTRIBUTE_MAX_PAIRS,
    ATTRIBUTE_VALUE_MAX_CHARS,
)

SERVICE_KEY = "service.name"
# Keys of the stage marks: stored attribute keys cannot hold a NUL (PostgreSQL's jsonb
# refuses it), so no attribute pair can be mistaken for a mark.
_WALL_KEY = "\0stage.wall"
_SHARE_KEY = "\0stage.share"
SHARE_STEPS = 20  # 5 % buckets


@lru_cache(maxsize=1 << 16)
def pair_hash(team_id: int, key: str, text: str) -> int:
    """The element's signed 64-bit hash in this team's sets; the same in every process."""
    data = b"%d\0%s\0%s" % (
        team_id,
        key.encode("utf-8", "surrogatepass"),
        text.encode("utf-8", "surrogatepass"),
    )
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "big", signed=True)


def wall_bucket(wall_ns: int) -> int:
    """``floor(4 · log2(wall_ns))``, exactly (integers only), at most a day's bucket."""
    clamped = min(max(wall_ns, 1), NS_PER_DAY)
    return (clamped**4).bit_length() - 1


MAX_WALL_BUCKET = wall_bucket(NS_PER_DAY)


def share_bucket(critical_ns: int, e2e_ns: int) -> int:
    """The share of the critical path in 5 % steps: 0 (under 5 %) to 20 (all of it)."""
    if e2e_ns <= 0:
        return 0
    return min(SHARE_STEPS, max(0, SHARE_STEPS * critical_ns // e2e_ns))


# Wall-time marks come in three widths: a quarter octave, an octave, four octaves.
# A sample carries one of each; "above the budget" is then a short list (at most 3 + 3
# + 12 marks) of the finest buckets up to the next octave, the octaves up to the next
# four, and the widest ones above: comparing each trace's set with a long list of
# quarter octaves would cost more than the rest of the filter.
WALL_WIDTHS = (1, 4, 16)  # in quarter octaves


def wall_mark(team_id: int, stage_id: int, bucket: int, width: int = 1) -> int:
    """The mark of the quarter-octave ``bucket``'s group of ``width`` quarter octaves."""
    return pair_hash(team_id, f"{_WALL_KEY}{width}", f"{stage_id}:{bucket // width}")


def share_mark(team_id: int, stage_id: int, bucket: int) -> int:
    return pair_hash(team_id, _SHARE_KEY, f"{stage_id}:{bucket}")


def ran_mark(team_id: int, stage_id: int) -> int:
    """Carried by every trace with a sample of the stage."""
    return pair_hash(team_id, _SHARE_KEY, f"{stage_id}:ran")


def degraded_mark(team_id: int, stage_id: int | None = None) -> int:
    """Carried by a trace on which a run-time client recorded a decision at the stage;
    with no stage, at any."""
    return pair_hash(team_id, _SHARE_KEY, f"{stage_id or 0}:degraded")


def stage_marks(
    *, team_id: int, stage_id: int, wall_ns: int, critical_ns: int, e2e_ns: int
) -> tuple[int, ...]:
    return _marks(team_id, stage_id, wall_bucket(wall_ns), share_bucket(critical_ns, e2e_ns))


@lru_cache(maxsize=1 << 14)
def _marks(team_id: int, stage_id: int, wall: int, share: int) -> tuple[int, ...]:
    # Samples of a stage fall in a few dozen buckets: analysis builds each set once.
    return (
        ran_mark(team_id, stage_id),
        *(wall_mark(team_id, stage_id, wall, width) for width in WALL_WIDTHS),
        share_mark(team_id, stage_id, share),
    )


def wall_above_marks(*, team_id: int, stage_id: int, wall_ns: int) -> tuple[int, list[int]]:
    """For wall times above ``wall_ns``: the mark of the finest bucket that holds
    ``wall_ns`` (its traces need a look at their sample), and the marks that cover every
    bucket above it, each once."""
    edge = wall_bucket(wall_ns + 1)
    beyond: list[int] = []
    start = edge + 1
    for width, outer in zip(WALL_WIDTHS, [*WALL_WIDTHS[1:], None], strict=True):
        # Groups of this width from ``start`` (a multiple of the width by then) up to
        # the next multiple of the wider width; the widest ones up to the last bucket.
        stop = MAX_WALL_BUCKET + 1 if outer is None else -(-start // outer) * outer
        while start < stop:
            beyond.append(wall_mark(team_id, stage_id, start, width))
            start += width
    return wall_mark(team_id, stage_id, edge), beyond


def trace_search_hashes(
    *,
    team_id: int,
    root: Span,
    spans: Iterable[Span],
    stages: Iterable[tuple[int, int, int]] = (),
    e2e_ns: int = 0,
    degraded: Iterable[int] = (),
) -> list[int]:
    """The sorted hashes of the trace's search set (see the module's docstring);
    ``spans`` are all of the trace's spans, the root among them; ``stages`` holds
    (stage id, wall ns, critical-path ns) per stage sample; ``degraded`` the ids of the
    stages a client recorded a decision at.

    Written for speed, as analysis calls it for every trace: one pass over the
    attributes, each distinct pair hashed once (``pair_hash`` remembers the common ones).
    """
    hashes: set[int] = set()
    for stage_id, wall_ns, critical_ns in stages:
        hashes.update(
            stage_marks(
                team_id=team_id, stage_id=stage_id, wall_ns=wall_ns, critical_ns=critical_ns,
                e2e_ns=e2e_ns,
            )
        )  # fmt: skip
    degraded_ids = set(degraded)
    if degraded_ids:
        hashes.add(degraded_mark(team_id))
        hashes.update(degraded_mark(team_id, stage_id) for stage_id in degraded_ids)
    seen: set[tuple[str, str]] = set()
    spans = list(spans)
    # In any order: which pairs come first matters only past the cap (``_first_pairs``).
    for span in spans:
        seen.add((SERVICE_KEY, span.service))
        for key, value in span.attributes.items():
            # Length first: a value may be a megabyte that is never turned into text.
            if len(key) > ATTRIBUTE_KEY_MAX_CHARS:
                continue
            if type(value) is str:
                if len(value) > ATTRIBUTE_VALUE_MAX_CHARS:
                    continue
                seen.add((key, value))
                continue
            text = attribute_text(value)
            if text is not None and len(text) <= ATTRIBUTE_VALUE_MAX_CHARS:
                seen.add((key, text))
        if len(seen) >= ATTRIBUTE_MAX_PAIRS:
            break
    pairs = list(seen)
    if len(pairs) >= ATTRIBUTE_MAX_PAIRS:
        ordered = sorted((s for s in spans if s is not root), key=_start)
        pairs = _first_pairs([root, *ordered])
    hashes.update(pair_hash(team_id, key, text) for key, text in pairs)
    return sorted(hashes)


def _start(span: Span) -> int:
    return span.start_ns


def _first_pairs(spans: list[Span]) -> list[tuple[str, str]]:
    """The first ``ATTRIBUTE_MAX_PAIRS`` distinct pairs, in span order then attribute
    order: for the rare trace with more."""
    kept: dict[tuple[str, str], None] = {}
    for span in spans:
        candidates = [(SERVICE_KEY, span.service)]
        for key, value in span.attributes.items():
            if len(key) > ATTRIBUTE_KEY_MAX_CHARS:
                continue
            if isinstance(value, str) and len(value) > ATTRIBUTE_VALUE_MAX_CHARS:
                continue
            text = attribute_text(value)
            if text is not None and len(text) <= ATTRIBUTE_VALUE_MAX_CHARS:
                candidates.append((key, text))
        for pair in candidates:
            kept[pair] = None
            if len(kept) >= ATTRIBUTE_MAX_PAIRS:
                return list(kept)
    return list(kept)
