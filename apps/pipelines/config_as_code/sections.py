"""The top-level sections a file may have, in the order they are planned and applied.

A section brings its own schema (nodes to a spec), planner (spec against the
database to steps) and exporter (database to plain data). ``pipelines:`` is built
in; apps above this one add theirs with ``section_register`` from their
``AppConfig.ready``, so that this package never imports them. Sections that others
refer to come first, so that their objects exist when the later ones apply.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from apps.pipelines.config_as_code.loader import Item
from apps.pipelines.config_as_code.pipelines_export import export_pipelines
from apps.pipelines.config_as_code.pipelines_plan import plan_pipelines
from apps.pipelines.config_as_code.pipelines_schema import parse_pipelines
from apps.pipelines.config_as_code.reader import Reader
from apps.pipelines.config_as_code.steps import ExportOptions, Plan, PlanOptions
from apps.teams.models import Team


@dataclass(frozen=True)
class Section:
    key: str
    # Errors go to the reader; the returned spec is only used when there are none.
    parse: Callable[[Item, Reader], Any]
    # The team is None when it does not exist yet (a dry run with --create-team).
    plan: Callable[[Team | None, Any, PlanOptions], Plan]
    # Plain data for the section, or None to leave the key out.
    export: Callable[[Team, ExportOptions], Any]
    # Checks what the section names against the database and the file's other sections
    # (their specs by key) once the team is known; errors go to the reader, with lines.
    check: Callable[[Team | None, Any, Mapping[str, Any], PlanOptions, Reader], None] | None = None
    # What the plan depends on beyond the file and the database (a secret read from the
    # environment): it goes into the plan's digest, never into its lines.
    fingerprint: Callable[[Any], str] | None = None


SECTIONS: tuple[Section, ...] = (
    Section("pipelines", parse_pipelines, plan_pipelines, lambda team, _: export_pipelines(team)),
)

# Registration order, which is also apply order among sections with no ``after`` between them.
_registered: dict[str, tuple[Section, str | None]] = {}


def section_register(section: Section, *, after: str | None = None) -> None:
    """Add a section, planned and applied after the built-in ones and after ``after``.

    Registered sections keep their registration order where ``after`` allows it.
    Registering a key again replaces the earlier registration, so an app's ``ready``
    may run twice.
    """
    if any(builtin.key == section.key for builtin in SECTIONS):
        raise ValueError(f"“{section.key}” is a built-in section.")
    if after == section.key:
        raise ValueError(f"Section “{section.key}” cannot come after itself.")
    _registered[section.key] = (section, after)


def section_unregister(key: str) -> None:
    _registered.pop(key, None)


def sections() -> tuple[Section, ...]:
    """The built-in and registered sections, in the order they are planned and applied."""
    ordered = list(SECTIONS)
    pending = list(_registered.values())
    while pending:
        keys = {section.key for section in ordered}
        ready = [entry for entry in pending if entry[1] is None or entry[1] in keys]
        if not ready:
            missing = ", ".join(f"“{after}” (for “{s.key}”)" for s, after in pending)
            raise LookupError(f"Sections registered after a section that is not: {missing}.")
        ordered += [section for section, _ in ready]
        pending = [entry for entry in pending if entry not in ready]
    return tuple(ordered)
