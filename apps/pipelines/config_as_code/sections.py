"""The top-level sections a file may have, in the order they are planned and applied.

A section brings its own schema (nodes to a spec), planner (spec against the
database to steps) and exporter (database to plain data). A new section, such
as ``channels:`` or ``alerts:``, is one more entry here; sections that others
refer to come first so that their objects exist when the later ones apply.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apps.pipelines.config_as_code.loader import Item
from apps.pipelines.config_as_code.pipelines_export import export_pipelines
from apps.pipelines.config_as_code.pipelines_plan import plan_pipelines
from apps.pipelines.config_as_code.pipelines_schema import parse_pipelines
from apps.pipelines.config_as_code.reader import Reader
from apps.pipelines.config_as_code.steps import Plan, PlanOptions
from apps.teams.models import Team


@dataclass(frozen=True)
class Section:
    key: str
    # Errors go to the reader; the returned spec is only used when there are none.
    parse: Callable[[Item, Reader], Any]
    # The team is None when it does not exist yet (a dry run with --create-team).
    plan: Callable[[Team | None, Any, PlanOptions], Plan]
    # Plain data for the section, or None to leave the key out.
    export: Callable[[Team], Any]


SECTIONS: tuple[Section, ...] = (
    Section("pipelines", parse_pipelines, plan_pipelines, export_pipelines),
)
