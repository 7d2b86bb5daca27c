"""Spans read projected (skeletons, the attributes rules compare, first-token events) give
analysis the very answer whole spans give, and carry nothing else of the spans; a read
takes whole traces until its byte budget."""

from typing import Any

from apps.analysis.attribution import attribute_trace
from apps.analysis.engine_timing import ENGINE_KEYS
from apps.analysis.pipeline_routing import compile_pipeline
from apps.analysis.span_projection import SPAN_OBJECT_BYTES, span_projection
from apps.analysis.stage_matching import StageMatcher
from apps.analysis.stored_spans import spans_of_traces, spans_read
from apps.ingest.models import Trace
from apps.pipelines.selectors import pipeline_with_stages
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.ingested_traces import ingest, now_ns
from tests.builders.spans import span
from tests.conftest import TeamWorld
from tests.timing import MS

TTFC = "gen_ai.response.time_to_first_chunk"
CHAT = {"gen_ai.operation.name": "chat"}
BLOB = "x" * 16_000
# Each child: its attributes and events; the comment says what matching makes of it.
CHILDREN: list[tuple[dict[str, Any], list[tuple[str, int]]]] = [
    ({"http.status_code": "200", "blob": BLOB}, []),  # status: a string equal to 200's text
    ({"http.status_code": 200.0}, []),  # status: a number whose text is "200"
    ({"http.status_code": "200 "}, []),  # none: a string equal to no compared text
    ({"cache.hit": True, "blob": BLOB}, []),  # cached
    ({"cache.hit": "true"}, []),  # cached: "true" is the boolean's text
    ({**CHAT, "note": "split at the token"}, [("token", 5), ("other", 2)]),  # until/after
    ({**CHAT, TTFC: 0.004}, [("token", 7)]),  # the time to first chunk wins over the event
    ({**CHAT, TTFC: "0.003"}, []),  # a number written as a string counts too
    ({"gen_ai.operation.name": ["chat"]}, [("token", 5)]),  # none: a list never matches
    ({**CHAT, TTFC: "0." + "0" * 70 + "1"}, []),  # split at its start: a long text, a number
    # An engine's span: queue and prefill (one as a string) cut it before its first token.
    (
        {
            "gen_ai.latency.time_in_queue": 0.002,
            "gen_ai.latency.time_in_model_prefill": "0.003",
            "gen_ai.latency.time_to_first_token": 0.006,
            "blob": BLOB,
        },
        [],
    ),
]


def matcher_of(world: TeamWorld) -> StageMatcher:
    pipeline = make_pipeline(world.team, "projected", match_root_span="POST /chat")
    make_rule(make_stage(pipeline, "status"), attributes={"http.status_code": 200})
    make_rule(make_stage(pipeline, "cached"), attributes={"cache.hit": True})
    make_rule(make_stage(pipeline, "queue"), span_name="call 10", portion="queue")
    make_rule(make_stage(pipeline, "engine"), span_name="call 10")
    for slug, portion in (("until", "until_first_token"), ("after", "after_first_token")):
        make_rule(make_stage(pipeline, slug), attributes=CHAT, portion=portion,
                  first_token_event="token")  # fmt: skip
    return compile_pipeline(pipeline_with_stages(pipeline=pipeline)).matcher


def stored_trace(world: TeamWorld, trace_id: int, t0: int) -> Trace:
    spans = [span(0x10, None, t0, t0 + 100 * MS, name="POST /chat", kind="server",
                  trace_id=trace_id)]  # fmt: skip
    for i, (attributes, events) in enumerate(CHILDREN):
        start = t0 + i * 10 * MS
        spans.append(span(0x100 + i, 0x10, start, start + 10 * MS, name=f"call {i}",
                          attributes=attributes, trace_id=trace_id,
                          events=[(name, start + ms * MS) for name, ms in events]))  # fmt: skip
    ingest(world.team, spans)
    return Trace.objects.get(team=world.team, trace_id=trace_id.to_bytes(16, "big"))


def test_projected_spans_match_split_and_attribute_as_whole_spans_do(world: TeamWorld) -> None:
    matcher = matcher_of(world)
    trace = stored_trace(world, 0xE1, now_ns() - 60_000 * MS)
    whole = spans_of_traces([trace])[trace.pk]

    read = spans_read([trace], projection=span_projection(matcher.rules), max_bytes=2**30)
    projected = [read_span.span for read_span in read.spans]

    by_id = {s.span_id: s for s in whole}
    assert {s.span_id: matcher.match(s) for s in projected} == {
        span_id: matcher.match(s) for span_id, s in by_id.items()
    }
    assert attribute_trace(projected, matcher) == attribute_trace(whole, matcher)
    # What the rules made of each child, so that the comparison above means something.
    stages = [matcher.match(by_id[f"{0x100 + i:016x}"]) for i in range(len(CHILDREN))]
    assert [(m.before_stage, m.after_stage) for m in stages] == [
        ("status", "status"), ("status", "status"), (None, None), ("cached", "cached"),
        ("cached", "cached"), ("until", "after"), ("until", "after"), ("until", "after"),
        (None, None), ("until", "after"), ("engine", "engine"),
    ]  # fmt: skip
    engine = stages[-1].engine
    assert engine is not None
    assert engine.queue_stage == "queue"


def test_a_projected_span_holds_only_the_compared_keys_and_first_token_events(
    world: TeamWorld,
) -> None:
    matcher = matcher_of(world)
    trace = stored_trace(world, 0xE2, now_ns() - 60_000 * MS)

    read = spans_read([trace], projection=span_projection(matcher.rules), max_bytes=2**30)

    compared = {"http.status_code", "cache.hit", "gen_ai.operation.name", TTFC, *ENGINE_KEYS}
    for read_span in read.spans:
        assert set(read_span.span.attributes) <= compared
        assert {name for name, _ in read_span.span.events} <= {"token", "first_token"}
    # Twelve skeletons and a few short values: nothing of the three 16,000-character blobs.
    texts = read.bytes_read - len(read.spans) * SPAN_OBJECT_BYTES
    assert 0 < texts < 1000


def test_a_read_takes_whole_traces_until_its_budget_and_names_the_first_left_out(
    world: TeamWorld,
) -> None:
    matcher = matcher_of(world)
    t0 = now_ns() - 60_000 * MS
    traces = [stored_trace(world, 0xE3 + i, t0 + i * MS) for i in range(3)]
    projection = span_projection(matcher.rules)
    one = spans_read(traces[:1], projection=projection, max_bytes=2**30).bytes_read

    read = spans_read(traces, projection=projection, max_bytes=2 * one + one // 2)

    assert {r.trace_pk for r in read.spans} == {traces[0].pk, traces[1].pk}
    assert len(read.spans) == 2 * (len(CHILDREN) + 1)
    assert (read.bytes_read, read.left_out_from) == (2 * one, traces[2].pk)
    # The first trace alone past the budget: nothing read, and it says which.
    nothing = spans_read(traces, projection=projection, max_bytes=one - 1)
    assert (nothing.spans, nothing.bytes_read, nothing.left_out_from) == ([], 0, traces[0].pk)
