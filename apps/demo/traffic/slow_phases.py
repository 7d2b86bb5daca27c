"""Bad minutes of a dependency, now and then, for the levers to act on.

Unlike a drift (``traffic_plan.Drift``), which slows a step for everyone, a slow phase
slows the application's usual dependency only: the replica a retrieval goes to first, or
the primary model's first token. A hedge's second replica and the fallback model keep
their usual pace, which is what lets those levers save the request.
"""

from dataclasses import dataclass

RETRIEVAL = "retrieval"
FIRST_TOKEN = "ttft"  # noqa: S105 - a stage's slug
SLOWED_STEPS = (RETRIEVAL, FIRST_TOKEN)


@dataclass(frozen=True)
class SlowPhases:
    """``length_s`` seconds every ``every_s``, the first ``first_s`` into the run; the
    phases take ``steps`` in turn, each ``factor`` times slower than planned."""

    every_s: float = 300.0
    length_s: float = 90.0
    first_s: float = 180.0
    factor: float = 6.0
    steps: tuple[str, ...] = SLOWED_STEPS

    def __post_init__(self) -> None:
        if not 0 < self.length_s <= self.every_s:
            raise ValueError("A slow phase lasts more than 0 s and at most its period.")
        if self.first_s < 0:
            raise ValueError("The first slow phase starts at 0 s or later.")
        if not 1 <= self.factor <= 100:
            raise ValueError("The slow factor is between 1 and 100.")
        if not self.steps or any(step not in SLOWED_STEPS for step in self.steps):
            raise ValueError(f"A slow phase slows {' or '.join(SLOWED_STEPS)}.")

    def step_at(self, elapsed_s: float) -> str | None:
        """The step slowed ``elapsed_s`` seconds into the run; None between phases."""
        if elapsed_s < self.first_s:
            return None
        phase, into = divmod(elapsed_s - self.first_s, self.every_s)
        if into >= self.length_s:
            return None
        return self.steps[int(phase) % len(self.steps)]
