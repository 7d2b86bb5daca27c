"""What-if runs asked for, computed by workers and expired; scenarios saved and deleted.

Replays run in the workers' ``whatif`` queue, never in a web process, and nobody waits
for them: the page and the API answer at once and poll. An account (all the teams it
created) has at most ``WHATIF_RUNS_PER_ACCOUNT`` runs waiting or running at once; past
that it is told to come back (429), so one account's burst of questions, however many
teams it spreads them over, cannot queue in front of another's.
"""

import hashlib
import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.core.isolation import failure_reason
from apps.pipelines.models import Pipeline
from apps.rollups.selectors.windows import DEFAULT_WINDOW, requested_bounds
from apps.teams.accounts import account_teams
from apps.whatif.levers import DEFAULT_HIT_RATIO
from apps.whatif.models import IN_FLIGHT, RunKind, RunStatus, SavedScenario, WhatIfRun
from apps.whatif.params import levers_params
from apps.whatif.selectors.compute import (
    pipeline_fingerprint,
    whatif_levers_result,
    whatif_replay_result,
)
from apps.whatif.selectors.sample import DEFAULT_TRACES

logger = logging.getLogger(__name__)

COMPUTE: dict[str, Callable[..., dict[str, Any]]] = {
    RunKind.REPLAY: whatif_replay_result,
    RunKind.LEVERS: whatif_levers_result,
}
MAX_SCENARIOS_PER_PIPELINE = 100
# A pipeline whose runtime document a client read within this gets fresh lever advice.
ADVICE_READERS_WITHIN = timedelta(hours=1)
ADVICE_PERCENTILE = "p95"


class WhatIfBusy(Exception):
    """The account has as many runs in flight as it may; ``retry_after_s`` to try again."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__("This account's earlier what-if runs are still being computed.")
        self.retry_after_s = retry_after_s


def _stale_before() -> Any:
    return timezone.now() - timedelta(seconds=settings.WHATIF_RUN_TIMEOUT_S)


def _key(pipeline: Pipeline, kind: str, params: dict[str, Any]) -> str:
    text = json.dumps(
        {"kind": kind, "params": params, "config": pipeline_fingerprint(pipeline=pipeline)},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _enqueue(run_id: int) -> None:
    from apps.whatif.tasks import compute_whatif_run

    transaction.on_commit(lambda: compute_whatif_run.delay(run_id))


def whatif_run_request(*, pipeline: Pipeline, kind: str, params: dict[str, Any]) -> WhatIfRun:
    """The run answering ``params``: one already asked for, or a new one enqueued.

    Returns at once, as the run is now (done when the same question was answered
    before). A failed run, or one whose worker has not finished it within
    ``WHATIF_RUN_TIMEOUT_S``, is asked again. Raises ``WhatIfBusy`` when a new run
    would take the pipeline's account past ``WHATIF_RUNS_PER_ACCOUNT``.
    """
    key = _key(pipeline, kind, params)
    run = WhatIfRun.objects.filter(pipeline=pipeline, key=key).first()
    if run is not None:
        stale = run.status in IN_FLIGHT and run.created_at < _stale_before()
        if run.status == RunStatus.FAILED or stale:
            _check_share(pipeline)
            WhatIfRun.objects.filter(pk=run.pk).update(
                status=RunStatus.PENDING, attempts=0, error="", created_at=timezone.now()
            )
            _enqueue(run.pk)
            run.refresh_from_db()
        return run
    _check_share(pipeline)
    try:
        with transaction.atomic():
            run = WhatIfRun.objects.create(
                team_id=pipeline.team_id, pipeline=pipeline, kind=kind, key=key, params=params
            )
    except IntegrityError:  # asked at the same moment by another request: share its run
        return WhatIfRun.objects.get(pipeline=pipeline, key=key)
    _enqueue(run.pk)
    # Read once more: a worker answering at once (or an eager one) has finished it.
    run.refresh_from_db()
    return run


def _check_share(pipeline: Pipeline) -> None:
    in_flight = WhatIfRun.objects.filter(
        team_id__in=account_teams(team=pipeline.team).values("pk"),
        status__in=IN_FLIGHT,
        created_at__gte=_stale_before(),
    )
    limit = settings.WHATIF_RUNS_PER_ACCOUNT
    if in_flight[:limit].count() >= limit:
        raise WhatIfBusy(retry_after_s=5)


def whatif_run_compute(*, run_id: int) -> str:
    """Claim the run and compute it; returns the status it ends in (or "skipped").

    Idempotent: a run finished, or claimed by a live worker, is left alone. A run
    whose workers died ``WHATIF_MAX_ATTEMPTS`` times fails instead of killing another.
    """
    now = timezone.now()
    claimable = Q(status=RunStatus.PENDING) | Q(
        status=RunStatus.RUNNING,
        started_at__lt=now - timedelta(seconds=settings.WHATIF_RUN_TIMEOUT_S),
    )
    claimed = WhatIfRun.objects.filter(claimable, pk=run_id).update(
        status=RunStatus.RUNNING, started_at=now, attempts=F("attempts") + 1
    )
    if not claimed:
        return "skipped"
    run = WhatIfRun.objects.select_related("pipeline").get(pk=run_id)
    if run.attempts > settings.WHATIF_MAX_ATTEMPTS:
        return _finish(run, error="Its computation stopped the worker more than once.")
    try:
        result = COMPUTE[run.kind](pipeline=run.pipeline, params=run.params)
    except ValidationError as exc:  # the pipeline changed under the question
        return _finish(run, error=" ".join(exc.messages))
    except Exception as exc:  # one run's failure is its own; the worker goes on
        logger.warning("what-if run %s failed: %s", run.pk, failure_reason(exc), exc_info=True)
        return _finish(run, error=f"The replay failed: {failure_reason(exc)}")
    return _finish(run, result=result)


def _finish(run: WhatIfRun, *, result: dict[str, Any] | None = None, error: str = "") -> str:
    status = RunStatus.FAILED if error else RunStatus.DONE
    WhatIfRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
        status=status, result=result, error=error[:2000], finished_at=timezone.now()
    )
    return status


def whatif_runs_expire(*, now: Any = None) -> int:
    """Delete runs older than ``WHATIF_RESULT_TTL_S``; their answers are asked again."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.WHATIF_RESULT_TTL_S)
    deleted, _ = WhatIfRun.objects.filter(created_at__lt=cutoff).delete()
    return deleted


def scenario_save(
    *, pipeline: Pipeline, name: str, changes: list[dict[str, Any]], user: User | None
) -> SavedScenario:
    """Save (or replace, by name) a scenario's changes, already checked by the caller."""
    name = name.strip()
    if not name:
        raise ValidationError({"name": ["Give the scenario a name."]})
    if not changes:
        raise ValidationError({"changes": ["A scenario needs at least one change."]})
    existing = SavedScenario.objects.filter(pipeline=pipeline, name=name).first()
    if existing is not None:
        existing.changes = changes
        existing.created_by = user
        existing.save(update_fields=["changes", "created_by", "updated_at"])
        return existing
    if SavedScenario.objects.filter(pipeline=pipeline).count() >= MAX_SCENARIOS_PER_PIPELINE:
        raise ValidationError(
            {"name": [f"A pipeline keeps at most {MAX_SCENARIOS_PER_PIPELINE} scenarios."]}
        )
    return SavedScenario.objects.create(
        pipeline=pipeline, name=name, changes=changes, created_by=user
    )


def scenario_delete(*, scenario: SavedScenario) -> None:
    scenario.delete()


def advice_runs_request(*, now: datetime | None = None) -> int:
    """Ask for a fresh lever search of every pipeline a run-time client read lately, so
    the advice in its runtime document follows the traffic; the runs asked for."""
    now = now or timezone.now()
    pipelines = Pipeline.objects.filter(runtime_read_at__gte=now - ADVICE_READERS_WITHIN)
    asked = 0
    start, end = requested_bounds(window=DEFAULT_WINDOW)
    for pipeline in pipelines.select_related("team"):
        params = levers_params(
            start=start, end=end, traces=DEFAULT_TRACES, percentile=ADVICE_PERCENTILE,
            hit_ratio=DEFAULT_HIT_RATIO,
        )  # fmt: skip
        try:
            whatif_run_request(pipeline=pipeline, kind=RunKind.LEVERS, params=params)
        except WhatIfBusy:
            continue  # the account's runs are busy: next time
        asked += 1
    return asked
