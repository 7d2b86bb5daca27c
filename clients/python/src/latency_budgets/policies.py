"""A stage's lever settings from the runtime document: the team's ``degrade`` policy and
the server's ``advice`` (``docs/runtime.md``).

A lever's setting comes from the call when the application gives one, else from the
policy, else from the advice, else from the stage's own figures. A lever the policy
leaves out of ``levers`` does not act: the call runs as if there were no lever, so a
team can turn one off without deploying.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from latency_budgets import protocol

LEVERS = (protocol.SKIP, protocol.FALLBACK, protocol.HEDGE, protocol.CAP)
HEDGE_PERCENTILES = ("p50", "p95", "p99")


class PolicyError(ValueError):
    """A ``degrade`` or ``advice`` object this client cannot use."""


@dataclass(frozen=True, slots=True)
class StagePolicy:
    levers: frozenset[str] | None = None  # None: every lever
    first_token_ms: float | None = None
    hedge_after: str | float | None = None
    cap_ms: float | None = None
    advised_first_token_ms: float | None = None
    advised_hedge_after_ms: float | None = None
    advised_cap_ms: float | None = None

    def allows(self, lever: str) -> bool:
        return self.levers is None or lever in self.levers

    @property
    def first_token(self) -> float | None:
        return (
            self.first_token_ms if self.first_token_ms is not None else self.advised_first_token_ms
        )

    @property
    def hedge(self) -> str | float | None:
        return self.hedge_after if self.hedge_after is not None else self.advised_hedge_after_ms

    @property
    def cap(self) -> float | None:
        return self.cap_ms if self.cap_ms is not None else self.advised_cap_ms


NO_POLICY = StagePolicy()
NO_LEVERS = StagePolicy(levers=frozenset())


def _ms(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(f"{where}: expected milliseconds, got {value!r}.")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise PolicyError(f"{where}: {value!r} is out of range.")
    return number


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: expected an object.")
    return value


def stage_policy(degrade: Any, advice: Any, where: str) -> StagePolicy:
    """The policy of one stage; unknown keys are left for later versions to use."""
    policy = _mapping(degrade, f"{where}.degrade")
    advised = _mapping(advice, f"{where}.advice")
    levers = policy.get("levers")
    if levers is not None:
        if not isinstance(levers, list) or not all(isinstance(lever, str) for lever in levers):
            raise PolicyError(f"{where}.degrade.levers: expected a list of lever names.")
        levers = frozenset(levers)
    after = policy.get("hedge_after")
    if isinstance(after, str):
        if after not in HEDGE_PERCENTILES:
            raise PolicyError(f"{where}.degrade.hedge_after: {after!r} is not p50, p95 or p99.")
    else:
        after = _ms(after, f"{where}.degrade.hedge_after")
    return StagePolicy(
        levers=levers,
        first_token_ms=_ms(policy.get("first_token_ms"), f"{where}.degrade.first_token_ms"),
        hedge_after=after,
        cap_ms=_ms(policy.get("cap_ms"), f"{where}.degrade.cap_ms"),
        advised_first_token_ms=_ms(advised.get("first_token_ms"), f"{where}.advice.first_token_ms"),
        advised_hedge_after_ms=_ms(advised.get("hedge_after_ms"), f"{where}.advice.hedge_after_ms"),
        advised_cap_ms=_ms(advised.get("cap_ms"), f"{where}.advice.cap_ms"),
    )
