"""Hand-made degradation ledgers for the degradation alert tests: requests counted in
the rollups, and ledger rows written as analysis writes them, at known times."""

from datetime import datetime
from decimal import Decimal
from itertools import count
from typing import Any

from apps.alerts.models import AlertRule, ConditionKind, RuleScope
from apps.analysis.models import Degradation, DegradationAction
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, Stage
from tests.builders.alerts import rule
from tests.builders.evaluation_rollups import make_trace, put_requests
from tests.timing import MS, S

ACTIONS = {action.label: action.value for action in DegradationAction}
_trace_pks = count(50_000_000)


def ns(moment: datetime) -> int:
    return int(moment.timestamp()) * S


def decisions(
    pipeline: Pipeline,
    stage: Stage,
    moment: datetime,
    actions: dict[str, int],
    *,
    traces: list[int] | None = None,
    examples: int = 0,
) -> list[Trace]:
    """One decision per request at ``stage`` for each action counted, on requests that
    started at ``moment``: on new requests, or on ``traces`` (their pks) in turn. The
    first ``examples`` requests are stored traces, the slowest of the batch."""
    stored: list[Trace] = []
    rows = []
    pks = iter(traces) if traces is not None else None
    seq = count()
    for action, number in actions.items():
        for _ in range(number):
            position = next(seq)
            slow = position < examples
            if slow:
                trace = make_trace(pipeline, start_ns=ns(moment), duration_ms=9000 - position)
                stored.append(trace)
                trace_pk = trace.pk
            else:
                trace_pk = next(pks) if pks is not None else next(_trace_pks)
            rows.append(
                Degradation(
                    trace_pk=trace_pk,
                    seq=stage.position,
                    start_ns=ns(moment),
                    team_id=pipeline.team_id,
                    pipeline_id=pipeline.pk,
                    stage_id=stage.pk,
                    action=ACTIONS[action],
                    saved_ns=50 * MS,
                    e2e_ns=(9000 - position if slow else 800) * MS,
                )
            )
    Degradation.objects.bulk_create(rows)
    return stored


def traffic(
    pipeline: Pipeline,
    moment: datetime,
    *,
    requests: int,
    degraded: dict[Stage, dict[str, int]] | None = None,
    examples: int = 0,
) -> list[Trace]:
    """``requests`` requests counted in the 10 s bucket of ``moment``, and decisions on
    some of them; returns the stored example traces, slowest first."""
    put_requests(pipeline, moment, total=requests, good=requests)
    stored: list[Trace] = []
    for stage, actions in (degraded or {}).items():
        stored += decisions(pipeline, stage, moment, actions, examples=examples)
    return stored


def degradation_rule(
    pipeline: Pipeline,
    channels: list[Any],
    *,
    percent: str = "20",
    minutes: int = 2,
    stage: Stage | None = None,
    scope: str | None = None,
    slug: str = "rerank-degraded",
    **fields: Any,
) -> AlertRule:
    if scope is None:
        scope = RuleScope.STAGE if stage is not None else RuleScope.E2E
    return rule(
        pipeline,
        channels,
        slug=slug,
        condition=ConditionKind.DEGRADATION,
        degradation_percent=Decimal(percent),
        violation_for_minutes=minutes,
        scope=scope,
        stage=stage,
        **fields,
    )
