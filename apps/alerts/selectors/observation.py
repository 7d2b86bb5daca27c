"""What one evaluation of a rule sees in one scope, whatever the rule's condition."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from apps.alerts.models import AlertRule
from apps.pipelines.models import Stage

E2E_KEY = "e2e"
OBJECTIVE_KEY = "objective"
NO_DATA_WINDOWS = 3


def stage_key(stage_id: int) -> str:
    return f"stage:{stage_id}"


@dataclass
class Observation:
    """``holds`` is None when the scope has no data; ``since`` is when the data says the
    condition began (a violation's opening), or None to count from this evaluation.
    ``judged`` is False when the data gives no verdict now but has not stopped: the
    scope's state stays where it is, as a violation stops moving on too few samples."""

    scope_key: str
    holds: bool | None
    stage: Stage | None = None
    since: datetime | None = None
    severity: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    judged: bool = True


def no_data_after(rule: AlertRule) -> timedelta:
    seconds = rule.no_data_after_s or NO_DATA_WINDOWS * rule.pipeline.evaluation_window_s
    return timedelta(seconds=seconds)
