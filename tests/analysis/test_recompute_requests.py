"""Asking for a recompute: bounded hours, one per account at a time, the window's start."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction

from apps.analysis.models import Recompute, RecomputeStatus
from apps.analysis.services.recompute import (
    RecomputeBusy,
    recompute_hours_offered,
    recompute_request,
    recompute_step,
    recomputes_expire,
    recomputes_stalled,
)
from apps.analysis.tasks import RECOMPUTE_SCHEDULED_KEY, recompute_schedule
from apps.teams.models import Role
from tests.builders.configuration import add_member, make_pipeline, make_team, make_user
from tests.conftest import TeamWorld


def test_the_hours_offered_stop_at_the_setting_which_is_offered_too(settings: Any) -> None:
    assert recompute_hours_offered() == [1, 3, 6, 12, 24]
    settings.RECOMPUTE_MAX_HOURS = 36
    assert recompute_hours_offered() == [1, 3, 6, 12, 24, 36]
    settings.RECOMPUTE_MAX_HOURS = 2
    assert recompute_hours_offered() == [1, 2]


@pytest.mark.parametrize("hours", [0, -1, 2, 25, 48, 10**9, "6", 6.0, True, None])
def test_hours_not_offered_are_refused_before_anything_is_written(
    world: TeamWorld, hours: object
) -> None:
    pipeline = make_pipeline(world.team, "rag")
    with pytest.raises(ValidationError) as refused:
        recompute_request(pipeline=pipeline, hours=hours, user=world.owner)  # type: ignore[arg-type]
    assert "1, 3, 6, 12, 24 hours" in refused.value.message_dict["hours"][0]
    assert not Recompute.objects.exists()


def test_one_recompute_per_account_at_a_time_and_the_same_one_is_joined(
    world: TeamWorld,
) -> None:
    rag = make_pipeline(world.team, "rag", name="RAG chat")
    agent = make_pipeline(world.team, "agent")
    first = recompute_request(pipeline=rag, hours=6, user=world.owner)

    again = recompute_request(pipeline=rag, hours=3, user=world.editor)
    with pytest.raises(RecomputeBusy) as more_hours:
        recompute_request(pipeline=rag, hours=24, user=world.editor)
    with pytest.raises(RecomputeBusy) as other_pipeline:
        recompute_request(pipeline=agent, hours=1, user=world.editor)

    assert (first.joined, again.joined, again.run.pk) == (False, True, first.run.pk)
    assert "last 6 hours are being recomputed" in str(more_hours.value)
    assert "ask for 24 hours once that has finished" in str(more_hours.value)
    assert "“RAG chat” is being recomputed (waiting for a worker)" in str(other_pipeline.value)
    assert Recompute.objects.count() == 1


def test_another_team_of_the_account_waits_too_without_learning_its_names(
    world: TeamWorld,
) -> None:
    second_team = make_team("acme-labs", owner=world.owner)
    member = make_user("mia")
    add_member(second_team, member, Role.EDITOR)
    recompute_request(pipeline=make_pipeline(world.team, "secret-project"), hours=1, user=None)

    with pytest.raises(RecomputeBusy) as refused:
        recompute_request(pipeline=make_pipeline(second_team, "labs"), hours=1, user=member)

    assert "another team of this account" in str(refused.value)
    assert "secret" not in str(refused.value).lower()
    # Another account is not held up.
    outsider_run = recompute_request(
        pipeline=make_pipeline(world.other_team, "rag"), hours=1, user=world.outsider
    )
    assert not outsider_run.joined


def test_a_finished_recompute_lets_the_next_one_start(world: TeamWorld) -> None:
    rag = make_pipeline(world.team, "rag")
    first = recompute_request(pipeline=rag, hours=1, user=None).run
    assert recompute_step(run_id=first.pk).outcome == "finished"  # no traces: done at once

    second = recompute_request(pipeline=rag, hours=24, user=None)

    assert not second.joined
    first.refresh_from_db()
    assert (first.status, first.total, first.done) == (RecomputeStatus.FINISHED, 0, 0)


def test_the_window_starts_no_earlier_than_the_spans_kept(world: TeamWorld, settings: Any) -> None:
    settings.SPAN_RETENTION_DAYS = 1
    now = datetime(2026, 3, 4, 5, 30, tzinfo=UTC)

    run = recompute_request(pipeline=make_pipeline(world.team), hours=24, user=None, now=now).run

    assert run.window_start == datetime(2026, 3, 4, tzinfo=UTC)  # today's spans, no older
    assert run.window_end == now
    assert run.hours == 24


@pytest.mark.django_db(transaction=True)
def test_a_request_queues_one_step_and_the_safety_net_finds_stalled_runs(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.core.cache import cache

    queued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        "apps.analysis.tasks.recompute_pipeline.apply_async",
        lambda args, countdown=0: queued.append((*args, countdown)),
    )
    pipeline = make_pipeline(world.team, "rag")
    with transaction.atomic():
        run = recompute_request(pipeline=pipeline, hours=1, user=None).run
        assert queued == []  # only once the run is committed
    assert queued == [(run.pk, 0)]
    recompute_schedule(run.pk)  # asked again while a step waits: one is enough
    assert len(queued) == 1

    later = run.progressed_at + timedelta(minutes=5)
    assert recomputes_stalled(now=later) == [run.pk]
    assert recomputes_stalled(now=run.progressed_at) == []
    cache.delete(RECOMPUTE_SCHEDULED_KEY.format(run_id=run.pk))
    recompute_schedule(run.pk)
    assert len(queued) == 2


def test_finished_runs_are_deleted_once_their_traces_are(world: TeamWorld, settings: Any) -> None:
    run = recompute_request(pipeline=make_pipeline(world.team), hours=1, user=None).run
    recompute_step(run_id=run.pk)
    run.refresh_from_db()
    assert run.finished_at is not None

    kept = recomputes_expire(now=run.finished_at + timedelta(days=settings.SAMPLE_RETENTION_DAYS))
    deleted = recomputes_expire(
        now=run.finished_at + timedelta(days=settings.SAMPLE_RETENTION_DAYS + 2)
    )

    assert (kept, deleted) == (0, 1)
