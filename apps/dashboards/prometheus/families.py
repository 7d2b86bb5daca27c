"""A team's figures as Prometheus metric families (docs/metrics.md lists them).

Base units as Prometheus has them: seconds, ratios between 0 and 1, ``_total`` on
counters. Percentiles carry ``quantile`` as a summary's would ("0.95"), so that an
observed series and its budget match on the same labels. A figure with no traces in
its window is left out rather than given as 0 or NaN: no data is no sample.
"""

from collections.abc import Iterable

from apps.core.percentiles import PERCENTILES, QUANTILES
from apps.dashboards.prometheus.exposition import Family, Kind, label_set
from apps.dashboards.selectors.metrics import (
    WINDOWS,
    PipelineMetrics,
    StageMetrics,
    TeamMetrics,
)

PREFIX = "latency_budget"
MS_PER_S = 1000
QUANTILE_LABELS = {p: label_set(("quantile", repr(QUANTILES[p]))) for p in PERCENTILES}
WINDOW_LABELS = {w: label_set(("window", w)) for w in WINDOWS}


def seconds(milliseconds: float) -> float:
    """Milliseconds (to 0.1 ms, as the API gives them) in seconds, without the binary
    fraction's tail (1.4368, not 1.4367999999999999)."""
    return round(milliseconds / MS_PER_S, 7)


def _in_order(percentiles: Iterable[str]) -> list[str]:
    """Budgeted and violated percentiles, p50 first; one no longer budgeted still shows
    while its violation is open."""
    return sorted(set(percentiles) & set(PERCENTILES), key=PERCENTILES.index)


def _family(name: str, kind: Kind, help_text: str, unit: str = "") -> Family:
    return Family(f"{PREFIX}_{name}", kind, help_text, unit)


class TeamFamilies:
    """Every family of a scrape, in the order they are written."""

    def __init__(self) -> None:
        self.pipeline_info = _family(
            "pipeline", "info", "A pipeline of the team and its display name."
        )
        self.pipeline_budget = _family(
            "pipeline_budget_seconds", "gauge",
            "End-to-end latency budget of the pipeline at a percentile.", "seconds",
        )  # fmt: skip
        self.pipeline_duration = _family(
            "pipeline_duration_seconds", "gauge",
            "Observed end-to-end duration of the pipeline's traces at a percentile, over the "
            "window (from the rollups' sketches, within 1 %).", "seconds",
        )  # fmt: skip
        self.pipeline_untracked = _family(
            "pipeline_untracked_critical_path_ratio", "gauge",
            "Share of the end-to-end time on the critical path in no stage, over the window.",
            "ratio",
        )  # fmt: skip
        self.traces = _family(
            "pipeline_traces", "counter", "Traces of the pipeline rolled up since it began."
        )
        self.trace_errors = _family(
            "pipeline_trace_errors", "counter",
            "Traces of the pipeline whose root span had an error status, since it began.",
        )  # fmt: skip
        self.violations = _family(
            "pipeline_violations_open", "gauge",
            "1 while the end-to-end budget at this percentile has an open violation, else 0.",
        )  # fmt: skip
        self.objective_target = _family(
            "pipeline_objective_target_ratio", "gauge",
            "Share of traces the objective wants under its threshold (0.99 for 99 %).", "ratio",
        )  # fmt: skip
        self.objective_threshold = _family(
            "pipeline_objective_threshold_seconds", "gauge",
            "Duration under which a trace counts towards the objective.", "seconds",
        )  # fmt: skip
        self.objective_good = _family(
            "pipeline_traces_within_objective", "counter",
            "Traces of the pipeline that finished under the objective's threshold, since it "
            "began.",
        )  # fmt: skip
        self.stage_info = _family("stage", "info", "A stage of a pipeline and its display name.")
        self.stage_budget = _family(
            "stage_budget_seconds", "gauge",
            "Latency budget of the stage at its percentile.", "seconds",
        )  # fmt: skip
        self.stage_duration = _family(
            "stage_duration_seconds", "gauge",
            "Observed wall time of the stage per trace at a percentile, over the window (from "
            "the rollups' sketches, within 1 %).", "seconds",
        )  # fmt: skip
        self.stage_critical = _family(
            "stage_critical_path_ratio", "gauge",
            "Share of the end-to-end time on the critical path spent in the stage, over the "
            "window.", "ratio",
        )  # fmt: skip
        self.stage_samples = _family(
            "stage_samples", "counter",
            "Traces that spent time in the stage, rolled up since the pipeline began.",
        )  # fmt: skip
        self.stage_violations = _family(
            "stage_violations_open", "gauge",
            "1 while the stage's budget at this percentile has an open violation, else 0.",
        )  # fmt: skip
        self.omitted = _family(
            "scrape_omitted", "gauge",
            "Pipelines or stages of the team left out of this scrape, past "
            "METRICS_MAX_PIPELINES or METRICS_MAX_STAGES.",
        )  # fmt: skip
        self.computed = _family(
            "scrape_computed_timestamp_seconds", "gauge",
            "When these figures were computed (Unix time); scrapes within "
            "METRICS_CACHE_SECONDS share them.", "seconds",
        )  # fmt: skip

    def all(self) -> list[Family]:
        return list(vars(self).values())

    def add_team(self, metrics: TeamMetrics) -> None:
        team = label_set(("team", metrics.team.slug))
        for pipeline in metrics.pipelines:
            self.add_pipeline(team, pipeline)
        self.omitted.add(f"{team},{label_set(('kind', 'pipelines'))}", metrics.omitted_pipelines)
        self.omitted.add(f"{team},{label_set(('kind', 'stages'))}", metrics.omitted_stages)
        self.computed.add(team, metrics.computed_at.timestamp())

    def add_pipeline(self, team: str, figures: PipelineMetrics) -> None:
        pipeline = figures.pipeline
        labels = f"{team},{label_set(('pipeline', pipeline.slug))}"
        self.pipeline_info.add(f"{labels},{label_set(('name', pipeline.name))}", 1)
        for percentile, budget_ms in pipeline.budget.items():
            self.pipeline_budget.add(f"{labels},{QUANTILE_LABELS[percentile]}", seconds(budget_ms))
        for window, observed in figures.windows.items():
            for percentile in PERCENTILES:
                value = observed.e2e_percentiles[percentile]
                if value is not None:
                    self.pipeline_duration.add(
                        f"{labels},{QUANTILE_LABELS[percentile]},{WINDOW_LABELS[window]}",
                        seconds(value),
                    )
            if observed.untracked_share is not None:
                self.pipeline_untracked.add(
                    f"{labels},{WINDOW_LABELS[window]}", observed.untracked_share
                )
        self.traces.add(labels, figures.totals.count)
        self.trace_errors.add(labels, figures.totals.errors)
        for percentile in _in_order(pipeline.budget.keys() | figures.open_percentiles):
            opened = percentile in figures.open_percentiles
            self.violations.add(f"{labels},{QUANTILE_LABELS[percentile]}", int(opened))
        if pipeline.objective_target is not None and pipeline.objective_threshold_ms is not None:
            self.objective_target.add(labels, float(pipeline.objective_target) / 100)
            self.objective_threshold.add(labels, seconds(pipeline.objective_threshold_ms))
            self.objective_good.add(labels, figures.totals.good)
        for stage_figures in figures.stages:
            self.add_stage(labels, stage_figures)

    def add_stage(self, pipeline_labels: str, figures: StageMetrics) -> None:
        stage = figures.stage
        labels = f"{pipeline_labels},{label_set(('stage', stage.slug))}"
        self.stage_info.add(f"{labels},{label_set(('name', stage.name))}", 1)
        if stage.budget_ms is not None:
            self.stage_budget.add(
                f"{labels},{QUANTILE_LABELS[stage.budget_percentile]}", seconds(stage.budget_ms)
            )
        for window, observed in figures.windows.items():
            for percentile in PERCENTILES:
                value = observed.percentiles[percentile]
                if value is not None:
                    self.stage_duration.add(
                        f"{labels},{QUANTILE_LABELS[percentile]},{WINDOW_LABELS[window]}",
                        seconds(value),
                    )
            if observed.share is not None:
                self.stage_critical.add(f"{labels},{WINDOW_LABELS[window]}", observed.share)
        self.stage_samples.add(labels, figures.totals.count)
        budgeted = {stage.budget_percentile} if stage.budget_ms is not None else set()
        for percentile in _in_order(budgeted | figures.open_percentiles):
            opened = percentile in figures.open_percentiles
            self.stage_violations.add(f"{labels},{QUANTILE_LABELS[percentile]}", int(opened))


def team_families(metrics: TeamMetrics) -> list[Family]:
    families = TeamFamilies()
    families.add_team(metrics)
    return families.all()
