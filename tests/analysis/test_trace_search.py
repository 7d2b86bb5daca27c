"""A trace's search set: attribute pairs compared as rules compare them, stage marks."""

import math

import pytest

from apps.analysis.trace_search import (
    MAX_WALL_BUCKET,
    SERVICE_KEY,
    pair_hash,
    share_bucket,
    stage_marks,
    trace_search_hashes,
    wall_bucket,
)
from apps.core.time import NS_PER_DAY
from tests.builders.spans import span

TEAM = 7


def hashes_of(*pairs: tuple[str, str], team: int = TEAM) -> set[int]:
    return {pair_hash(team, key, text) for key, text in pairs}


def test_the_same_pair_hashes_differently_in_another_team() -> None:
    assert pair_hash(1, "user.id", "42") != pair_hash(2, "user.id", "42")
    assert pair_hash(1, "user.id", "42") == pair_hash(1, "user.id", "42")
    # Key and value are kept apart: "a=b" + "c" is not "a" + "b=c".
    assert pair_hash(1, "a", "bc") != pair_hash(1, "ab", "c")


def test_every_span_gives_its_scalar_attributes_and_its_service() -> None:
    root = span(1, None, name="POST /ask", service="api", attributes={"user.id": 42})
    child = span(
        2, 1, name="chat", service="llm",
        attributes={"gen_ai.request.model": "gpt-4o-mini", "temperature": 0.5,
                    "stream": True, "ratio": 2.0, "stops": ["\n"], "meta": {"a": 1}},
    )  # fmt: skip
    got = set(trace_search_hashes(team_id=TEAM, root=root, spans=[root, child]))
    assert got == hashes_of(
        (SERVICE_KEY, "api"), ("user.id", "42"), (SERVICE_KEY, "llm"),
        ("gen_ai.request.model", "gpt-4o-mini"), ("temperature", "0.5"), ("stream", "true"),
        ("ratio", "2"),
    )  # fmt: skip


def test_long_keys_and_values_are_left_out() -> None:
    root = span(1, None, attributes={"k" * 129: "v", "prompt": "p" * 257, "ok": "v" * 256})
    got = set(trace_search_hashes(team_id=TEAM, root=root, spans=[root]))
    assert got == hashes_of((SERVICE_KEY, "chat-api"), ("ok", "v" * 256))


def test_past_the_cap_the_roots_pairs_come_first_then_spans_by_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("apps.analysis.trace_search.ATTRIBUTE_MAX_PAIRS", 4)
    root = span(1, None, 100, 200, service="api", attributes={"a": 1, "b": 2})
    late = span(3, 1, 150, 160, service="api", attributes={"late": 1})
    early = span(2, 1, 110, 120, service="api", attributes={"early": 1, "later": 2})
    stages = [(5, 30, 10)]
    got = set(
        trace_search_hashes(
            team_id=TEAM, root=root, spans=[late, root, early], stages=stages, e2e_ns=100
        )
    )
    marks = set(stage_marks(team_id=TEAM, stage_id=5, wall_ns=30, critical_ns=10, e2e_ns=100))
    # Stage marks are never crowded out; of pairs, the root's three and the earliest span's first.
    assert got == marks | hashes_of((SERVICE_KEY, "api"), ("a", "1"), ("b", "2"), ("early", "1"))


@pytest.mark.parametrize(
    ("wall_ns", "bucket"),
    [(0, 0), (1, 0), (2, 4), (3, 6), (4, 8), (1024, 40), (1023, 39), (NS_PER_DAY * 5, None)],
)
def test_wall_buckets_are_quarter_octaves_computed_exactly(wall_ns: int, bucket: int) -> None:
    expected = MAX_WALL_BUCKET if bucket is None else bucket
    assert wall_bucket(wall_ns) == expected
    if bucket is not None and wall_ns > 0:
        # The bucket's lower edge is 2^(bucket/4): within it, and the next one above.
        assert 2 ** (bucket / 4) <= wall_ns < 2 ** ((bucket + 1) / 4)


def test_marks_are_per_stage() -> None:
    one = stage_marks(team_id=TEAM, stage_id=3, wall_ns=500, critical_ns=5, e2e_ns=10)
    other = stage_marks(team_id=TEAM, stage_id=4, wall_ns=500, critical_ns=5, e2e_ns=10)
    assert not set(one) & set(other)


@pytest.mark.parametrize(
    ("critical", "e2e", "bucket"), [(0, 100, 0), (5, 100, 1), (49, 100, 9), (100, 100, 20),
                                    (150, 100, 20), (10, 0, 0)],
)  # fmt: skip
def test_share_buckets_are_five_percent_steps(critical: int, e2e: int, bucket: int) -> None:
    assert share_bucket(critical, e2e) == bucket


def test_marks_above_an_edge_cover_each_bucket_past_it_and_no_other() -> None:
    """Exhaustively: a sample in bucket q carries a mark "above e" exactly when q > e,
    and the list stays short."""
    from apps.analysis.trace_search import WALL_WIDTHS, wall_above_marks, wall_mark

    carried = {
        q: {wall_mark(TEAM, 3, q, width) for width in WALL_WIDTHS}
        for q in range(MAX_WALL_BUCKET + 1)
    }
    edges = 0
    for edge in range(MAX_WALL_BUCKET + 1):
        # The budget whose next nanosecond starts the edge bucket (the first few
        # buckets hold no whole nanosecond: no budget has them as its edge).
        wall_ns = math.ceil(2 ** (edge / 4)) - 1
        if wall_bucket(wall_ns + 1) != edge:
            continue
        edges += 1
        edge_mark, beyond = wall_above_marks(team_id=TEAM, stage_id=3, wall_ns=wall_ns)
        assert edge_mark == wall_mark(TEAM, 3, edge)
        assert len(beyond) <= 3 + 3 + 12
        for q, marks in carried.items():
            assert bool(marks & set(beyond)) == (q > edge), (edge, q)
    assert edges > 170
