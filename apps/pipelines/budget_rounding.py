"""Budgets as people write them: whole steps of 1, 5, 10 or 50 ms by size.

A budget worked out from a share or from observed percentiles ("187.5 ms", "3412 ms")
reads better, and compares more easily, as "185 ms" or "3450 ms". Rounding down keeps
budgets that must fit inside another one inside it; rounding up keeps a budget that
must cover an observed figure above it.
"""

import math
from fractions import Fraction

Amount = int | float | Fraction


def budget_step(ms: Amount) -> int:
    """The step a budget of about ``ms`` milliseconds is written in."""
    if ms < 20:
        return 1
    if ms < 200:
        return 5
    if ms < 2000:
        return 10
    return 50


def _steps(ms: Amount, step: int) -> Amount:
    # Floating-point products such as 50 x 1.1 = 55.00000000000001 count as whole steps.
    return ms / step if isinstance(ms, Fraction) else round(ms / step, 9)


def budget_round_down(ms: Amount) -> int:
    """The largest step at or below ``ms``: 0 below 1 ms, which is no budget at all."""
    step = budget_step(ms)
    return max(0, math.floor(_steps(ms, step)) * step)


def budget_round_up(ms: Amount) -> int:
    """The smallest step at or above ``ms``; at least 1 ms."""
    step = budget_step(ms)
    return max(1, math.ceil(_steps(ms, step)) * step)
