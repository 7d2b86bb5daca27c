"""A rollup bucket or a pipeline evaluation that fails is quarantined; the pass goes on."""

from datetime import UTC, datetime

import numpy as np
from django.core.management import call_command

from apps.analysis.models import DirtyBucket
from apps.core.models import QuarantinedItem, QuarantineKind
from apps.pipelines.models import Pipeline
from apps.rollups.models import BudgetEvaluation, RollupBucket, Violation
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.rollups.services.evaluation import budgets_check_promptly, budgets_evaluate
from tests.builders.configuration import make_pipeline, make_stage
from tests.builders.evaluation_rollups import at, put_rollup
from tests.builders.samples_and_rollups import (
    NEW_YEAR_S,
    add_random_traces,
    assert_rollups_exact,
    make_rollup_pipeline,
)
from tests.conftest import TeamWorld
from tests.rollups.refusals import refused_rows
from tests.timing import S

SOON_AFTER = datetime.fromtimestamp(NEW_YEAR_S + 600, tz=UTC)


def test_a_bucket_the_database_refuses_is_quarantined_and_other_pipelines_roll_up(
    world: TeamWorld,
) -> None:
    victim, victim_stages = make_rollup_pipeline(world.team, "rag", stages=2)
    hostile, hostile_stages = make_rollup_pipeline(world.other_team, "evil", stages=2)
    rng = np.random.default_rng(7)
    for pipeline, stages in ((victim, victim_stages), (hostile, hostile_stages)):
        add_random_traces(pipeline, stages, rng=rng, n=40, from_ns=NEW_YEAR_S * S, span_s=10)

    with refused_rows("rollups_rollupbucket", pipeline_id=hostile.pk, message="bucket refused"):
        result = rollups_process_dirty(now=SOON_AFTER)

    assert assert_rollups_exact(victim)
    assert not RollupBucket.objects.filter(pipeline_id=hostile.pk).exists()
    held = DirtyBucket.objects.get(pipeline_id=hostile.pk)
    assert held.quarantined_at is not None
    item = QuarantinedItem.objects.get(kind=QuarantineKind.ROLLUP_BUCKET, item_id=held.pk)
    assert item.team_id == world.other_team.pk
    assert "bucket refused" in item.reason
    assert result.pipelines[10] == {victim.pk}


def test_a_quarantined_bucket_is_skipped_until_released_then_rolled_up(world: TeamWorld) -> None:
    hostile, stages = make_rollup_pipeline(world.other_team, "evil", stages=1)
    rng = np.random.default_rng(8)
    add_random_traces(hostile, stages, rng=rng, n=20, from_ns=NEW_YEAR_S * S, span_s=10)
    with refused_rows("rollups_rollupbucket", pipeline_id=hostile.pk, message="bucket refused"):
        rollups_process_dirty(now=SOON_AFTER)
        # New samples in the same bucket do not bring it back.
        add_random_traces(hostile, stages, rng=rng, n=5, from_ns=NEW_YEAR_S * S, span_s=10)
        assert rollups_process_dirty(now=SOON_AFTER).buckets == 0

    call_command("quarantine", "retry", "--kind", "rollup_bucket")
    rollups_process_dirty(now=SOON_AFTER)

    assert not DirtyBucket.objects.exists()
    assert assert_rollups_exact(hostile)


def over_budget(world: TeamWorld, team_slug: str) -> Pipeline:
    team = world.team if team_slug == "victim" else world.other_team
    pipeline = make_pipeline(team, f"{team_slug}-chat")
    Pipeline.objects.filter(pk=pipeline.pk).update(evaluation_window_s=60)
    pipeline.refresh_from_db()
    retrieval = make_stage(pipeline, "retrieval", budget_ms=350)
    put_rollup(pipeline, retrieval, at(0), np.linspace(500, 900, 40))
    return pipeline


def test_a_pipeline_whose_evaluation_fails_is_quarantined_and_the_others_are_evaluated(
    world: TeamWorld,
) -> None:
    hostile = over_budget(world, "hostile")
    victim = over_budget(world, "victim")

    with refused_rows("rollups_violation", pipeline_id=hostile.pk, message="violation refused"):
        result = budgets_evaluate(now=at(5))

    assert (result.opened, result.quarantined) == (1, 1)
    assert Violation.objects.get().pipeline_id == victim.pk
    assert BudgetEvaluation.objects.get(pipeline=hostile).quarantined_at is not None
    item = QuarantinedItem.objects.get(kind=QuarantineKind.EVALUATION)
    assert (item.item_id, item.team_id) == (hostile.pk, world.other_team.pk)
    assert "violation refused" in item.reason


def test_a_quarantined_pipeline_is_left_out_of_ticks_and_prompt_checks_until_released(
    world: TeamWorld, clean_cache: None
) -> None:
    hostile = over_budget(world, "hostile")
    with refused_rows("rollups_violation", pipeline_id=hostile.pk, message="violation refused"):
        budgets_evaluate(now=at(5))
    # Fixed: the refusal is gone, but nothing evaluates the pipeline until it is released.
    assert budgets_evaluate(now=at(15)).pipelines == 0
    assert budgets_check_promptly(pipeline_ids=[hostile.pk], now=at(16)).pipelines == 0
    assert not Violation.objects.exists()

    call_command("quarantine", "retry", "--id", str(hostile.pk), "--kind", "evaluation")

    assert budgets_evaluate(now=at(25)).opened == 1
