"""The fit check's suggestions: stage budgets never below what the stages do, and when
the end-to-end budget cannot be met, an end-to-end budget that can, or the targets the
stages would have to reach to keep it.

Per stage with traffic: ``o`` its observed percentile (at its own budget percentile),
``base = o x (1 + HEADROOM)``, ``f`` the share of its wall time on the critical path
(1 for a sequential stage, 0 for one always hidden behind slower work), so ``f x base``
spends end-to-end time and ``(1 - f) x base`` runs beside it. Of the end-to-end budget
E, the stages may spend ``A = E - U``, U being the critical-path time in no stage at
E's percentile. Percentiles do not add, but budgets are allocated by adding them, as
the allocation bar does.

* **The budget can be met** when ``U + sum(f x o) <= E`` and the observed end-to-end
  percentile is within E. The bases, rounded up, are suggested when they fit
  (``U + sum(f x base) <= E``, ``k`` = 1); otherwise, with ``D = sum(f x base)`` and
  ``k = A / D``, each stage is suggested ``(1 - f) x base + k x f x base`` rounded
  down: the on-path parts shrink together until they fit, eating into the headroom
  only, so no suggestion is below its observed percentile.
* **It cannot**: stage suggestions are the bases rounded up, as the traces show them,
  and the end-to-end budget suggested is the larger of what those add up to on the
  critical path (``U + sum(f x suggestion)``) and the observed end-to-end percentile
  plus headroom; under it the same suggestions fit, so applying both leaves nothing
  more to suggest. Keeping E instead needs targets: the scaling above with
  ``k = min(1, A / D)``, below the observed percentiles, which is said per stage.
  Without room (``A <= 0``: orchestration alone exceeds E) there are no targets.

Budgets come in the steps people write (``budget_rounding``): rounded up where they
must cover an observed figure, down where they must fit into what is left, and never
below the observed percentile but for targets.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from apps.pipelines.budget_rounding import budget_round_down, budget_round_up

HEADROOM = 0.10


@dataclass(frozen=True)
class Suggestions:
    # Never below the stage's observed percentile.
    stage_ms: dict[int, int]
    # To keep the end-to-end budget when it cannot be met; may be below observed.
    target_ms: dict[int, int]
    # k applied to the on-path parts: of stage_ms when the budget can be met, of
    # target_ms when it cannot; None without a budget, traffic or room.
    scale: float | None
    # U + sum(f x o): what the stages, as observed, spend of the end-to-end time.
    needed_ms: float | None
    # Whether the end-to-end budget can be met; None without a budget or traffic.
    met: bool | None
    # The end-to-end budget suggested when it cannot be met.
    e2e_ms: int | None


def _budget(x: float, observed: float | None = None) -> int:
    """``x`` rounded down to a step, but never under ``observed`` (whole ms) or 1 ms."""
    floor = math.ceil(observed) if observed is not None else 1
    return max(1, floor, budget_round_down(x))


def suggest_budgets(
    *,
    observed_ms: Mapping[int, float],
    critical_fraction: Mapping[int, float],
    budget_ms: int | None,
    untracked_ms: float,
    e2e_observed_ms: float | None = None,
) -> Suggestions:
    """Suggested budgets by stage id for the end-to-end ``budget_ms`` (see the module)."""
    bases = {stage_id: o * (1 + HEADROOM) for stage_id, o in observed_ms.items()}
    on_path = {stage_id: critical_fraction.get(stage_id, 0.0) for stage_id in bases}

    def scaled(k: float) -> dict[int, float]:
        return {i: base - on_path[i] * base + k * on_path[i] * base for i, base in bases.items()}

    # Observed plus headroom, rounded up: what each stage needs, as the traces show it.
    covering = {i: budget_round_up(base) for i, base in bases.items()}
    if budget_ms is None or not bases:
        return Suggestions(covering, {}, None, None, None, None)
    needed = untracked_ms + sum(on_path[i] * o for i, o in observed_ms.items())
    available = budget_ms - untracked_ms
    demand = sum(on_path[i] * base for i, base in bases.items())
    covered = untracked_ms + sum(on_path[i] * ms for i, ms in covering.items())
    e2e_over = e2e_observed_ms is not None and e2e_observed_ms > budget_ms
    if needed <= budget_ms and not e2e_over:
        if covered <= budget_ms:
            return Suggestions(covering, {}, 1.0, needed, True, None)
        k = min(1.0, available / demand) if demand > 0 else 1.0
        fitted = {i: _budget(x, observed_ms[i]) for i, x in scaled(k).items()}
        return Suggestions(fitted, {}, k, needed, True, None)

    # Under this the covering budgets fit whole, so applying both leaves nothing to suggest.
    e2e = budget_round_up(max(covered, (e2e_observed_ms or 0.0) * (1 + HEADROOM)))
    if available <= 0 or demand <= 0:
        return Suggestions(covering, {}, None, needed, False, e2e)
    k = min(1.0, available / demand)
    targets = {i: _budget(x) for i, x in scaled(k).items()}
    return Suggestions(covering, targets, k, needed, False, e2e)
