import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from apps.teams.models import Team


@dataclass(frozen=True)
class PlanOptions:
    prune: bool = False


@dataclass(frozen=True)
class ExportOptions:
    """Who reads the export: ``masked`` leaves out what only owners and editors may read
    (a webhook URL's path and query, which often is its token), as the pages do for viewers."""

    masked: bool = True


@dataclass
class Step:
    """One unit of work with the plan lines it stands for.

    ``lines`` may be empty for bookkeeping a user need not see (renumbering stage
    positions after an insertion); ``line`` is where the change comes from in the file.
    """

    lines: list[str]
    run: Callable[[Team], object] | None
    line: int | None = None


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, step: Step) -> None:
        self.steps.append(step)

    def extend(self, other: "Plan") -> None:
        self.steps += other.steps
        self.notes += other.notes

    @property
    def changes(self) -> list[str]:
        return [line for step in self.steps for line in step.lines]

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)

    def render(self) -> list[str]:
        return (self.changes or ["No changes."]) + self.notes

    def digest(self) -> str:
        """Fingerprint of the changes, to tell whether a preview is still what apply would do."""
        return hashlib.sha256("\n".join(self.changes).encode()).hexdigest()
