"""Advice for the run-time client's levers, from replays of the pipeline's own traces.

For each stage the replay tries the client's levers (``docs/runtime.md``) at a few
settings drawn from the stage's own times and proposes the best of each:

- a **first-token fallback** for a stage that ends at an LLM's first token: give up on
  the call after a timeout and stream from a fallback whose first token comes at the
  stage's median;
- a **hedge**: a second attempt once the stage has run past a delay, the first answer
  winning; it costs a second call for every request past the delay;
- a **cap** at the stage's budget, for a stage whose p99 is past it: the request goes on
  without the rest of the stage's result.

Each with the replayed end-to-end p95 and p99 and the share of requests within the
pipeline's deadline, against the traces as they ran. A setting is proposed only when
it brings more requests within the deadline (or, without a deadline, a lower p99) and
its extra calls stay under ``MAX_EXTRA_SHARE``.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from apps.core.time import NS_PER_MS
from apps.whatif.changes import CAP, FALLBACK, HEDGE, Change
from apps.whatif.outcome import Floats, nearest_rank
from apps.whatif.replay import ReplayModel, replay
from apps.whatif.scenario import Scenario, scenario_compile

# Settings tried, as quantiles of the stage's own time.
TRIED_QUANTILES = (0.75, 0.9, 0.95, 0.99)
# A lever that sends a second call (or falls back) on more requests than this costs
# more than it is worth as a default; the what-if page still lets one try it.
MAX_EXTRA_SHARE = 0.2
# Fewer traces with the stage than this say nothing about its tail.
MIN_TRACES = 20


@dataclass(frozen=True)
class AdviceStage:
    slug: str
    name: str
    budget_ms: int | None
    first_token: bool  # the stage ends at an LLM call's first token


@dataclass(frozen=True)
class Effect:
    p95_ms: float | None
    p99_ms: float | None
    within_pct: float | None  # of requests within the deadline; None without one

    def as_data(self) -> dict[str, Any]:
        return {"p95_ms": self.p95_ms, "p99_ms": self.p99_ms, "within_pct": self.within_pct}


@dataclass(frozen=True)
class Advice:
    lever: str  # fallback, hedge or cap
    stage: str
    title: str
    setting_ms: float  # the timeout, the delay or the cap
    before: Effect
    after: Effect
    extra_pct: float  # requests that send a second call or fall back, in percent
    change: Change

    def as_data(self) -> dict[str, Any]:
        return {
            "lever": self.lever,
            "stage": self.stage,
            "title": self.title,
            "setting_ms": self.setting_ms,
            "before": self.before.as_data(),
            "after": self.after.as_data(),
            "extra_pct": self.extra_pct,
            "changes": [self.change.as_data()],
        }


def _ms(value_ns: float | None) -> float | None:
    return None if value_ns is None else round(value_ns / NS_PER_MS, 1)


def _effect(e2e_ns: Floats, deadline_ms: int | None) -> Effect:
    within = None
    if deadline_ms is not None and len(e2e_ns):
        within = round(float(np.mean(e2e_ns <= deadline_ms * NS_PER_MS)) * 100, 1)
    return Effect(
        p95_ms=_ms(nearest_rank(e2e_ns, 0.95)),
        p99_ms=_ms(nearest_rank(e2e_ns, 0.99)),
        within_pct=within,
    )


def _better(after: Effect, before: Effect) -> bool:
    if after.within_pct is not None and before.within_pct is not None:
        return after.within_pct > before.within_pct
    return (after.p99_ms or 0) < (before.p99_ms or 0)


def _score(effect: Effect) -> tuple[float, float]:
    return (effect.within_pct or 0.0, -(effect.p99_ms or 0.0))


def advice_find(
    model: ReplayModel, *, stages: Sequence[AdviceStage], deadline_ms: int | None
) -> list[Advice]:
    """The proposed setting of each lever on each stage, best first per stage."""
    slugs = model.stage_slugs
    budgets = {stage.slug: stage.budget_ms for stage in stages}
    base = replay(model, Scenario(), figures=False).e2e_ns
    before = _effect(base, deadline_ms)
    found: list[Advice] = []

    def tried(change: Change) -> Effect:
        scenario = scenario_compile([change], stage_slugs=slugs, budgets_ms=budgets)
        return _effect(replay(model, scenario, figures=False).e2e_ns, deadline_ms)

    for stage in stages:
        if stage.slug not in slugs:
            continue
        walls = model.observed_wall_ns[:, slugs.index(stage.slug)]
        ran = walls[walls > 0]
        if len(ran) < MIN_TRACES:
            continue
        settings = sorted({round(float(np.quantile(ran, q)) / NS_PER_MS) for q in TRIED_QUANTILES})
        settings = [ms for ms in settings if ms >= 1]
        candidates: list[Advice] = []
        if stage.first_token:
            median = round(float(np.median(ran)) / NS_PER_MS)
            for after in settings:
                change = Change(stage.slug, FALLBACK, ms=float(after), fallback_ms=float(median))
                extra = float(np.mean(walls > after * NS_PER_MS)) * 100
                title = (
                    f"{stage.name}: fall back when it has not answered within {after} ms"
                    f" (the fallback taking about {median} ms, the stage's median)"
                )
                candidates.append(
                    Advice(FALLBACK, stage.slug, title, float(after), before,
                           tried(change), round(extra, 1), change)
                )  # fmt: skip
        for delay in settings:
            change = Change(stage.slug, HEDGE, ms=float(delay))
            extra = float(np.mean(walls > delay * NS_PER_MS)) * 100
            title = f"{stage.name}: hedge with a second attempt after {delay} ms"
            candidates.append(
                Advice(HEDGE, stage.slug, title, float(delay), before, tried(change),
                       round(extra, 1), change)
            )  # fmt: skip
        if (
            not stage.first_token
            and stage.budget_ms is not None
            and float(np.quantile(ran, 0.99)) > stage.budget_ms * NS_PER_MS
        ):
            change = Change(stage.slug, CAP, ms=float(stage.budget_ms))
            extra = float(np.mean(walls > stage.budget_ms * NS_PER_MS)) * 100
            title = f"{stage.name}: cap at its budget of {stage.budget_ms} ms"
            candidates.append(
                Advice(CAP, stage.slug, title, float(stage.budget_ms), before, tried(change),
                       round(extra, 1), change)
            )  # fmt: skip
        for lever in (FALLBACK, HEDGE, CAP):
            usable = [
                a for a in candidates
                if a.lever == lever and a.extra_pct <= MAX_EXTRA_SHARE * 100
                and _better(a.after, before)
            ]  # fmt: skip
            if usable:
                # The best effect; of equals, the one that acts on the fewest requests.
                found.append(max(usable, key=lambda a: (*_score(a.after), -a.extra_pct)))
    return found
