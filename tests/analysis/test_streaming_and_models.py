"""Streaming figures and the split by model: per span, then through ingest, analysis and
rollups against exact computation on generated chunk timings."""

from typing import Any

import pytest

from apps.analysis.attribution import attribute_trace
from apps.analysis.llm_figures import StreamFigures, stage_llm
from apps.analysis.models import MAX_MODELS_PER_TEAM, OTHER_MODEL, ServedModel, StageSample
from apps.analysis.services.served_models import served_model_ids
from apps.analysis.spans import Span
from apps.analysis.stage_matching import RuleSpec, StageMatcher, StageSpec
from apps.rollups.models import Measure
from apps.rollups.selectors.llm import stage_llm_figures, stage_model_shares
from tests.builders.bucket_rows import nearest_rank
from tests.builders.ingested_traces import ingest_and_roll_up
from tests.builders.spans import T0, span
from tests.builders.streamed_traffic import CHUNK, streamed_traffic, streaming_pipeline
from tests.conftest import TeamWorld
from tests.timing import MS

QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
MATCHER = StageMatcher(
    [
        StageSpec("ttft", [RuleSpec(span_name="chat*", portion="until_first_token")], 0),
        StageSpec("generation", [RuleSpec(span_name="chat*", portion="after_first_token")], 1),
        StageSpec("agent", [RuleSpec(span_name="agent*")], 2),
    ]
)


def chat(
    span_id: int,
    start_ms: float,
    end_ms: float,
    *,
    parent: int = 1,
    model: str = "llama",
    first_ms: float | None = None,
    chunks_ms: tuple[float, ...] = (),
    extra: dict[str, Any] | None = None,
) -> Span:
    events = [] if first_ms is None else [("first_token", T0 + round(first_ms * MS))]
    events += [(CHUNK, T0 + round(ms * MS)) for ms in chunks_ms]
    return span(
        span_id,
        parent,
        T0 + round(start_ms * MS),
        T0 + round(end_ms * MS),
        name=f"chat {model}",
        attributes={"gen_ai.request.model": model, "gen_ai.provider.name": "vllm", **(extra or {})},
        events=events,
    )


def root(end_ms: float = 2000) -> Span:
    return span(1, None, T0, T0 + round(end_ms * MS), name="POST /chat")


def figures(*spans: Span) -> dict:
    result = attribute_trace(spans, MATCHER)
    return stage_llm({s.span_id: s for s in spans}, result.matches)


def test_a_streamed_answer_gives_its_tokens_time_after_the_first_and_longest_gap() -> None:
    answer = chat(
        2, 100, 1100, first_ms=300, chunks_ms=(300, 340, 390, 700, 760, 1050),
        extra={"gen_ai.usage.output_tokens": 51},
    )  # fmt: skip
    found = figures(root(), answer)
    expected = StreamFigures(output_tokens=51, generation_ns=800 * MS, max_gap_ns=310 * MS)
    # The answer's figures go to the stage of its generation; its model to both.
    assert found["generation"].stream == expected
    assert found["ttft"].stream is None
    assert found["ttft"].model == ("vllm", "llama")
    assert found["generation"].model == ("vllm", "llama")


def test_chunks_outside_the_answer_are_clamped_and_the_first_token_is_the_first_chunk() -> None:
    answer = chat(2, 100, 600, first_ms=200, chunks_ms=(50, 450, 900))
    stream = figures(root(), answer)["generation"].stream
    # 50 counts as the first token at 200, 900 as the end at 600: gaps 250 and 150.
    assert stream == StreamFigures(output_tokens=None, generation_ns=400 * MS, max_gap_ns=250 * MS)


def test_the_completion_token_count_stands_in_for_output_tokens() -> None:
    answer = chat(2, 0, 500, first_ms=100, extra={"gen_ai.usage.completion_tokens": 9})
    assert figures(root(), answer)["generation"].stream == StreamFigures(9, 400 * MS, None)


@pytest.mark.parametrize("tokens", [-3, 2.5, "12", True, None])
def test_unusable_token_counts_without_chunks_give_no_stream(tokens: Any) -> None:
    answer = chat(2, 0, 500, first_ms=100, extra={"gen_ai.usage.output_tokens": tokens})
    found = figures(root(), answer)["generation"]
    assert found.stream is None
    assert found.model == ("vllm", "llama")


def test_without_a_first_token_there_is_no_stream() -> None:
    answer = chat(2, 0, 500, chunks_ms=(100, 200), extra={"gen_ai.usage.output_tokens": 9})
    assert figures(root(), answer)["ttft"].stream is None


def test_a_fallback_that_answered_after_the_primary_gives_the_stage_its_model() -> None:
    primary = chat(2, 0, 400, model="llama")  # cancelled at 400 ms, no first token
    fallback = chat(3, 400, 1200, model="gpt-4o-mini", first_ms=600, chunks_ms=(600, 1200))
    found = figures(root(), primary, fallback)
    assert found["ttft"].model == ("vllm", "gpt-4o-mini")
    assert found["generation"].model == ("vllm", "gpt-4o-mini")


def test_the_response_model_wins_and_gen_ai_system_names_the_provider() -> None:
    answer = span(
        2, 1, T0, T0 + 100 * MS, name="chat x",
        attributes={"gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06",
                    "gen_ai.system": "openai"},
    )  # fmt: skip
    assert figures(root(), answer)["ttft"].model == ("openai", "gpt-4o-2024-08-06")


def test_a_span_inside_a_stage_that_names_its_model_marks_the_stage() -> None:
    agent = span(2, 1, T0, T0 + 500 * MS, name="agent step")
    inner = span(3, 2, T0 + 10 * MS, T0 + 400 * MS, name="POST /v1/chat/completions",
                 attributes={"gen_ai.request.model": "m" * 500})  # fmt: skip
    assert figures(root(), agent, inner)["agent"].model == ("", "m" * 200)


@pytest.mark.django_db
def test_model_names_past_a_teams_cap_count_as_its_other_models(world: TeamWorld) -> None:
    team, other = world.team.pk, world.other_team.pk
    first = served_model_ids({(team, "p", f"m{i}") for i in range(MAX_MODELS_PER_TEAM)})
    assert len(set(first.values())) == MAX_MODELS_PER_TEAM
    more = served_model_ids({(team, "p", "late-1"), (team, "p", "late-2"), (other, "p", "m0")})
    other_row = ServedModel.objects.get(team_id=team, model=OTHER_MODEL)
    assert more[(team, "p", "late-1")] == more[(team, "p", "late-2")] == other_row.pk
    # Another team is not affected by the first one's names.
    assert ServedModel.objects.get(pk=more[(other, "p", "m0")]).team_id == other
    assert served_model_ids({(team, "p", "m3")}) == {(team, "p", "m3"): first[(team, "p", "m3")]}


# Through ingest, analysis and rollups.


def within_one_percent(got: float | None, exact: float) -> bool:
    return got is not None and abs(got - exact) <= 0.01 * exact


@pytest.mark.django_db
def test_streaming_figures_and_models_equal_exact_computation(world: TeamWorld) -> None:
    pipeline = streaming_pipeline(world.team)
    sent = streamed_traffic(400)
    ingest_and_roll_up(world.team, sent.spans)
    generation = pipeline.stages.get(slug="generation")
    assert StageSample.objects.filter(stage_id=generation.pk, model_id__isnull=False).count() == 400

    found = stage_llm_figures(
        pipeline=pipeline, stage=generation, start=sent.start_s, end=sent.end_s
    )
    columns = {
        Measure.TIME_PER_OUTPUT_TOKEN: [row[2] / MS for row in sent.rows],
        Measure.OUTPUT_TOKENS_PER_S: [row[3] for row in sent.rows],
        Measure.MAX_CHUNK_GAP: [row[4] / MS for row in sent.rows],
    }
    for measure, values in columns.items():
        distribution = found.streams[measure]
        assert distribution.count == 400
        for name, q in QUANTILES.items():
            exact = nearest_rank(values, q)
            assert within_one_percent(distribution.sketch.quantile(q), exact), (measure, name)

    by_model = {figures.model.model: figures for figures in found.models}
    assert list(by_model) == ["large", "small"]  # the most samples first
    small = [row for row in sent.rows if row[0] == "small"]
    assert by_model["small"].wall.count == len(small)
    assert by_model["small"].share == pytest.approx(len(small) / 400)
    for model, figures in by_model.items():
        rows = [row for row in sent.rows if row[0] == model]
        walls = [row[1] / MS for row in rows]
        gaps = [row[4] / MS for row in rows]
        for q in QUANTILES.values():
            assert within_one_percent(figures.wall.sketch.quantile(q), nearest_rank(walls, q))
            gap = figures.streams[Measure.MAX_CHUNK_GAP].sketch.quantile(q)
            assert within_one_percent(gap, nearest_rank(gaps, q))

    shares = stage_model_shares(
        pipeline=pipeline, stage=generation, start=sent.start_s, end=sent.end_s
    )
    assert sum(shares.counts) == 400
    assert [model.model for model, _ in shares.shares] == ["large", "small"]
    for number, total in enumerate(shares.counts):
        if total:
            assert sum(values[number] or 0 for _, values in shares.shares) == pytest.approx(1)
