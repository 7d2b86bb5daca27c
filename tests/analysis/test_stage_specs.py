import pytest

from apps.analysis.attribution import attribute_trace
from apps.analysis.stage_matching import (
    REGEX,
    UNTIL_FIRST_TOKEN,
    RuleSpec,
    StageMatcher,
    StageSpec,
    stage_specs_from_pipeline,
)
from apps.pipelines.presets import pipeline_create_from_preset
from apps.pipelines.selectors import pipeline_with_stages
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_rule, make_stage, make_team
from tests.builders.spans import span
from tests.timing import MS

pytestmark = pytest.mark.django_db


@pytest.fixture
def team() -> Team:
    return make_team("acme")


def test_specs_follow_stage_and_rule_positions_from_the_database(team: Team) -> None:
    pipeline = make_pipeline(team, "chat")
    later = make_stage(pipeline, "later", position=2)
    first = make_stage(pipeline, "first", position=1)
    make_rule(first, span_name="b*", position=1)
    make_rule(
        first,
        span_name="^a",
        name_match=REGEX,
        attributes={"n": 3},
        span_kind="client",
        service="rag",
        portion=UNTIL_FIRST_TOKEN,
        first_token_event="chunk",
        position=0,
    )
    make_rule(later, span_name="*")

    specs = stage_specs_from_pipeline(pipeline_with_stages(pipeline=pipeline))

    assert specs == [
        StageSpec(
            "first",
            [
                RuleSpec(
                    span_name="^a",
                    name_match=REGEX,
                    attributes={"n": 3},
                    span_kind="client",
                    service="rag",
                    portion=UNTIL_FIRST_TOKEN,
                    first_token_event="chunk",
                    position=0,
                ),
                RuleSpec(span_name="b*", position=1),
            ],
            position=1,
        ),
        StageSpec("later", [RuleSpec(span_name="*")], position=2),
    ]


def test_the_rag_preset_splits_a_streaming_answer_into_ttft_and_generation(team: Team) -> None:
    pipeline = pipeline_create_from_preset(
        team=team, preset="rag-chat", slug="rag", name="RAG", budget={"p95": 4000}
    )
    matcher = StageMatcher(stage_specs_from_pipeline(pipeline_with_stages(pipeline=pipeline)))
    spans = [
        span("root", None, 0, 1000 * MS, name="POST /chat"),
        span("emb", "root", 20 * MS, 80 * MS, attributes={"gen_ai.operation.name": "embeddings"}),
        span("vec", "root", 80 * MS, 300 * MS, name="vector.search.topk"),
        span(
            "llm",
            "root",
            300 * MS,
            1000 * MS,
            attributes={"gen_ai.operation.name": "chat"},
            events=(("first_token", 650 * MS),),
        ),
    ]

    result = attribute_trace(spans, matcher)

    assert matcher.stage_slugs == ("embedding", "retrieval", "rerank", "ttft", "generation")
    assert {slug: stage.critical_ns // MS for slug, stage in result.stages.items()} == {
        "embedding": 60,
        "retrieval": 220,
        "ttft": 350,
        "generation": 350,
    }
    assert result.untracked_critical_ns == 20 * MS
