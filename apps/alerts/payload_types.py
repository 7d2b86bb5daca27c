"""The shape of a notification's payload: the native webhook body, and what every
other format (Alertmanager, Slack, email) is rendered from."""

from typing import TypedDict


class Named(TypedDict):
    slug: str
    name: str


class RuleFacts(TypedDict):
    slug: str
    name: str
    severity: str  # info | warning | critical (the incident's, for burn-rate pairs)
    condition: str  # violation | burn_rate | degradation
    scope: str  # e2e | any_stage | stage:<slug>


class IncidentFacts(TypedDict):
    id: int | None  # None for a test
    status: str  # firing | resolved
    started_at: str  # ISO 8601, UTC
    ended_at: str | None
    resolution: str | None  # recovered | no_data | rule_changed
    duration_s: float | None
    fingerprint: str  # stable per rule and scope: 16 hex digits


class StageShare(TypedDict):
    slug: str
    name: str
    share: float | None  # of the critical path, 0..1
    percentile: str | None  # the stage budget's percentile
    observed_ms: float | None
    budget_ms: int | None
    over_by_ms: float | None


class BurnRateFacts(TypedDict):
    long_window_s: int
    short_window_s: int
    factor: float
    long_burn_rate: float | None
    short_burn_rate: float | None
    severity: str


class DegradationFacts(TypedDict):
    """A degradation rule's figures over its window: requests a run-time client degraded."""

    rate_percent: float  # of the window's requests, with a decision in scope (latest)
    peak_rate_percent: float  # the highest while it fired
    threshold_percent: float  # the rule's
    degraded: int  # requests with a decision in scope
    requests: int  # the pipeline's requests in the window
    by_action: dict[str, int]  # decisions by action (skip, fallback, ...), largest first
    by_stage: dict[str, int]  # end to end: degraded requests by stage slug; else empty


class Links(TypedDict):
    dashboard: str
    incident: str | None
    traces: list[str]


class Payload(TypedDict):
    type: str  # alert.firing | alert.resolved | alert.no_data | alert.test
    test: bool  # true for a channel test, whose figures are made up
    id: str  # the message id, "msg_…", also the webhook-id header
    created_at: str
    reminder: int  # 0, or the how-manieth reminder of a firing alert
    team: Named
    rule: RuleFacts
    incident: IncidentFacts
    pipeline: Named
    stage: Named | None  # None for the end-to-end time
    percentile: str | None
    observed_ms: float | None
    # The highest the percentile was while its violation was open: over the budget even
    # when ``observed_ms``, the latest, is back under it and the violation not yet closed.
    peak_ms: float | None
    budget_ms: int | None
    over_by_ms: float | None
    window_s: int
    burn_rates: list[BurnRateFacts]  # the pairs that hold, burn-rate rules only
    degradation: DegradationFacts | None  # degradation rules only
    top_stages: list[StageShare]  # by critical-path share, largest first, up to 5
    example_trace_ids: list[str]  # hex, slowest first
    links: Links
    # One line: "rag-chat · stage retrieval p95 812 ms over its 500 ms budget"; once
    # resolved "rag-chat · stage retrieval p95 431 ms, back under its 500 ms budget";
    # "rag-chat · stage rerank degraded on 34.0 % of 812 requests over 5 min (threshold
    # 20 %): 270 fallback, 6 skip".
    summary: str
