"""The projection and a span's details applied in Python (as the ClickHouse store does)
give exactly what the PostgreSQL store's SQL gives, text for text, on the same spans:
so analysis, the pages and a read's byte count are the same on either store."""

from typing import Any

import pytest

from apps.analysis.span_projection import span_projection
from apps.ingest.models import Span, Trace
from apps.ingest.selectors.span_details import MAX_SHOWN_VALUES
from apps.ingest.span_store.postgres import PostgresSpanStore
from apps.ingest.span_store.projection import SpanProjection
from apps.ingest.span_store.python_projection import (
    PythonProjection,
    content_rows,
    projected_texts,
    read_weight,
)
from tests.analysis.test_span_projection import matcher_of
from tests.builders.ingested_traces import ingest, now_ns
from tests.builders.spans import span
from tests.conftest import TeamWorld
from tests.timing import MS

# The spans are read from PostgreSQL's table by its own store's SQL, the reference the
# Python shaping is held to; on ClickHouse, tests/span_store compares the two stores.
pytestmark = pytest.mark.postgres_spans

LONG = "y" * 300
ATTRIBUTES: list[dict[str, Any]] = [
    {},
    {"http.status_code": "200", "blob": "x" * 5000, "ünïcode": "naïve ✓"},
    {"http.status_code": 200, "cache.hit": True, "count": -7, "ratio": 0.25},
    {"http.status_code": "201", "cache.hit": "true", "list": [1, "a", None], "map": {"k": 1}},
    {"gen_ai.operation.name": "chat", "gen_ai.response.time_to_first_chunk": "0.003"},
    {"gen_ai.latency.time_in_queue": 0.002, "gen_ai.latency.time_to_first_token": 1.5},
    {"shown.key": "short", "other": LONG, "db.statement": "SELECT 1\n\tFROM t WHERE a = 'b'"},
    {"shown.key": LONG, "big": 12345678901234, "neg": -0.5, "flag": False},
]
EVENTS: list[list[tuple[str, int, dict[str, Any]]]] = [
    [],
    [("token", 5, {})],
    [("first_token", 3, {"why": "x" * 400}), ("other", 4, {"a": 1, "b": [1, 2]})],
    [("exception", 2, {"exception.message": "boom", "exception.type": "ValueError"})],
]


def stored(world: TeamWorld) -> Trace:
    t0 = now_ns() - 60_000 * MS
    spans = [span(0x10, None, t0, t0 + 100 * MS, name="POST /chat", kind="server",
                  message="bad things happened " * 40, status="error")]  # fmt: skip
    for i, attributes in enumerate(ATTRIBUTES):
        for j, events in enumerate(EVENTS):
            start = t0 + (i * 10 + j) * MS
            spans.append(span(0x100 + i * 10 + j, 0x10, start, start + 5 * MS,
                              name=f"call {i} {j} " + "n" * (i * 100), service="svc" * (i + 1),
                              attributes=attributes,
                              events=[(n, start + ms * MS, a) for n, ms, a in events]))  # fmt: skip
    ingest(world.team, spans)
    return Trace.objects.get(team=world.team)


def python_read(trace: Trace, projection: SpanProjection) -> tuple[list[tuple[Any, ...]], int]:
    """The projected rows and their weight, shaped in Python from the whole stored spans."""
    shape = PythonProjection(projection)
    rows, weight = [], 0
    for stored_span in Span.objects.filter(trace_pk=trace.pk).values_list(
        "span_id", "parent_span_id", "name", "service", "kind", "start_ns", "end_ns",
        "attributes", "events", "status", "status_message",
    ):  # fmt: skip
        span_id, parent, name, service, kind, start, end, _, _, status, message = stored_span
        texts = _texts(trace, bytes(span_id), start)
        name, service, message = projected_texts(name.encode(), service.encode(), message.encode())
        attributes, events = shape.attributes(texts[0]), shape.events(texts[1])
        weight += read_weight(name, service, attributes, events, message)
        rows.append((trace.pk, bytes(span_id), parent and bytes(parent), name, service, kind,
                     start, end, attributes, events, status, message))  # fmt: skip
    return sorted(rows, key=lambda r: r[1]), weight


def _texts(trace: Trace, span_id: bytes, start: int) -> tuple[bytes, bytes]:
    """The span's attributes and events as the drain's JSON text (what ClickHouse keeps)."""
    for row in PostgresSpanStore().spans_of_traces([trace]):
        if row.span_id == span_id and row.start_ns == start:
            return _compact(row.attributes), _compact(row.events)
    raise AssertionError("no such span")


def _compact(text: str) -> bytes:
    import msgspec

    return msgspec.json.encode(msgspec.json.decode(text))


@pytest.mark.parametrize("shown", [(), ("shown.key",)])
def test_a_projection_in_python_gives_the_sql_projection_text_for_text(
    world: TeamWorld, shown: tuple[str, ...]
) -> None:
    trace = stored(world)
    projection = span_projection(matcher_of(world).rules, shown=shown)

    sql = PostgresSpanStore().spans_projected([trace], projection, 2**30)
    in_python, weight = python_read(trace, projection)

    sql_rows = sorted(
        ((*row[:2], row[2] and bytes(row[2]), *row[3:]) for row in sql.rows), key=lambda r: r[1]
    )
    sql_rows = [(row[0], bytes(row[1]), *row[2:]) for row in sql_rows]
    assert len(sql_rows) == len(ATTRIBUTES) * len(EVENTS) + 1
    assert sql_rows == in_python
    assert sql.bytes_read == weight
    # Something of each kind was kept and left behind, so the comparison means something.
    kept = "".join(row[8] for row in in_python)
    assert "http.status_code" in kept
    assert "blob" not in kept
    assert "list" not in kept
    assert ("short" in kept) == bool(shown)
    assert LONG not in kept


def test_a_spans_details_in_python_are_the_sql_details_row_for_row(world: TeamWorld) -> None:
    trace = stored(world)
    store = PostgresSpanStore()
    compared = 0
    for row in store.spans_of_traces([trace]):
        attributes, events = _texts(trace, row.span_id, row.start_ns)
        for chars, limit in ((200, MAX_SHOWN_VALUES), (10, 3), (1000, 1)):
            sql = store.span_content(trace, row.span_id, row.start_ns, chars=chars, limit=limit)
            assert content_rows(attributes, events, chars=chars, limit=limit) == sql
            compared += len(sql)
    assert compared > 200
