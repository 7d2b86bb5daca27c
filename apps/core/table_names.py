"""Literal table names in the code, where the model's ``_meta.db_table`` belongs.

SQL written against a literal name breaks silently when a table is renamed, and hides
which app writes which tables. Migrations are exempt: they are history, and say what
the tables were called when they ran.
"""

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps


@dataclass(frozen=True)
class LiteralTableName:
    path: Path
    line: int
    table: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.table}: use the model's _meta.db_table"


def project_tables() -> list[str]:
    """The tables of the project's own models (``apps.*``)."""
    return sorted(
        model._meta.db_table
        for model in apps.get_models(include_auto_created=True)
        if model.__module__.startswith("apps.")
    )


def _sources(roots: Iterable[Path]) -> Iterator[Path]:
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def literal_table_names(roots: Iterable[Path], tables: Iterable[str]) -> list[LiteralTableName]:
    """Each whole-word mention of a table name in the sources under ``roots``."""
    pattern = re.compile(r"\b(" + "|".join(re.escape(t) for t in tables) + r")\b")
    found = []
    for path in _sources(roots):
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [LiteralTableName(path, number, m.group(1)) for m in pattern.finditer(text)]
    return found
