import pytest
from django.core.exceptions import ValidationError

from apps.pipelines.selectors import pipeline_with_stages
from apps.pipelines.services import stages_reorder
from apps.pipelines.validation import validate_budget_mapping
from tests.conftest import TeamWorld
from tests.factories import make_pipeline, make_stage


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
