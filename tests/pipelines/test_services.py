import pytest
from django.core.exceptions import ValidationError

from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import pipeline_with_stages
from apps.pipelines.services import (
    pipeline_create,
    pipeline_update,
    span_rule_create,
    span_rule_update,
    stages_reorder,
)
from apps.pipelines.validation import (
    EVALUATION_SETTINGS,
    validate_budget_mapping,
    validate_evaluation_value,
    validate_span_name,
)
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -float("inf"), 2.5, "100", True])
def test_a_budget_that_is_not_a_whole_finite_number_is_rejected(value: object) -> None:
    with pytest.raises(ValidationError):
        validate_budget_mapping({"p95": value})


def test_reorder_works_on_a_pipeline_whose_stages_were_prefetched_before_a_change(
    world: TeamWorld,
) -> None:
    pipeline = make_pipeline(world.team, "rag")
    first = make_stage(pipeline, "a")
    loaded = pipeline_with_stages(pipeline=pipeline)
    second = make_stage(loaded, "b")
    stages = stages_reorder(pipeline=loaded, ordered_ids=[second.id, first.id])
    assert [stage.slug for stage in stages] == ["b", "a"]


# --- Budget evaluation settings -----------------------------------------------


def test_pipeline_create_and_update_take_the_evaluation_settings(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "rag", evaluation_window_s=600, min_samples=5)
    pipeline.refresh_from_db()
    assert (pipeline.evaluation_window_s, pipeline.min_samples, pipeline.close_after) == (
        600,
        5,
        3,
    )
    pipeline_update(pipeline=pipeline, close_after=12)
    pipeline.refresh_from_db()
    assert (pipeline.evaluation_window_s, pipeline.min_samples, pipeline.close_after) == (
        600,
        5,
        12,
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("evaluation_window_s", 59, "greater than or equal to 60"),
        ("evaluation_window_s", 3601, "less than or equal to 3600"),
        ("min_samples", 0, "greater than or equal to 1"),
        ("min_samples", 100_001, "less than or equal to 100000"),
        ("close_after", 0, "greater than or equal to 1"),
        ("close_after", 361, "less than or equal to 360"),
        ("evaluation_window_s", 300.7, "Enter a whole number."),
        ("min_samples", True, "Enter a whole number."),
        ("close_after", "3", "Enter a whole number."),
        ("close_after", None, "Enter a whole number."),
    ],
)
def test_out_of_range_or_non_whole_evaluation_settings_are_refused(
    world: TeamWorld, field: str, value: object, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        pipeline_create(
            team=world.team, slug="rag", name="RAG", budget={"p95": 1}, **{field: value}
        )
    messages = caught.value.message_dict[field]
    assert len(messages) == 1
    assert message in messages[0]
    assert not Pipeline.objects.exists()


def test_a_refused_update_leaves_the_evaluation_settings_as_they_were(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "rag", min_samples=50)
    with pytest.raises(ValidationError):
        pipeline_update(pipeline=pipeline, min_samples=0, name="Renamed")
    stored = Pipeline.objects.get(pk=pipeline.pk)
    assert (stored.min_samples, stored.name) == (50, "Rag")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("window_s", 30, "window_s must be between 60 and 3600 seconds, not 30."),
        ("min_samples", 100_001, "min_samples must be between 1 and 100000 samples"),
        ("close_after", 0, "close_after must be between 1 and 360 evaluations, not 0."),
        ("window_s", 300.5, "window_s must be a whole number of seconds."),
        ("window_s", float("inf"), "whole number"),
        ("window_s", float("nan"), "whole number"),
        ("close_after", True, "whole number"),
        ("min_samples", "20", "whole number"),
    ],
)
def test_the_shared_evaluation_check_names_the_key_and_bounds(
    key: str, value: object, message: str
) -> None:
    setting = next(s for s in EVALUATION_SETTINGS if s.key == key)
    with pytest.raises(ValidationError) as caught:
        validate_evaluation_value(setting, value)
    assert message in caught.value.messages[0]


def test_the_shared_evaluation_check_accepts_whole_floats_as_integers() -> None:
    (window, *_) = EVALUATION_SETTINGS
    assert validate_evaluation_value(window, 600.0) == 600
    assert type(validate_evaluation_value(window, 600.0)) is int


# --- Span-name patterns ---------------------------------------------------------


def test_a_nested_quantifier_saves_but_a_backreference_is_refused_naming_it(
    world: TeamWorld,
) -> None:
    stage = make_stage(make_pipeline(world.team, "rag"), "retrieval")
    span_rule_create(stage=stage, span_name="^(a+)+$", name_match="regex")
    with pytest.raises(ValidationError) as caught:
        span_rule_create(stage=stage, span_name=r"(a)\1", name_match="regex")
    assert caught.value.message_dict["span_name"] == [
        "Invalid regular expression “(a)\\1”: backreferences are not supported (RE2 syntax)."
    ]
    assert list(stage.rules.values_list("span_name", flat=True)) == ["^(a+)+$"]


def test_an_update_to_a_lookahead_is_refused_and_the_rule_kept(world: TeamWorld) -> None:
    rule = make_rule(make_stage(make_pipeline(world.team, "rag"), "retrieval"), span_name="a*")
    with pytest.raises(ValidationError, match="lookahead assertions are not supported"):
        span_rule_update(rule=rule, span_name="(?=x)", name_match="regex")
    rule.refresh_from_db()
    assert (rule.span_name, rule.name_match) == ("a*", "glob")


@pytest.mark.parametrize("name_match", ["glob", "regex"])
def test_the_shared_check_refuses_a_pattern_over_500_characters(name_match: str) -> None:
    with pytest.raises(ValidationError, match="longer than 500 characters"):
        validate_span_name("a" * 501, name_match)


def test_a_root_span_glob_too_complex_to_match_is_refused(world: TeamWorld) -> None:
    with pytest.raises(ValidationError) as caught:
        make_pipeline(world.team, "rag", match_root_span="?" * 200)
    assert "too complex" in caught.value.message_dict["match_root_span"][0]
    assert not Pipeline.objects.filter(slug="rag").exists()
