"""A whole configuration file: the team and each known section, validated with line numbers."""

from dataclasses import dataclass
from typing import Any

from apps.pipelines.config_as_code.errors import ConfigInvalid
from apps.pipelines.config_as_code.loader import load_yaml
from apps.pipelines.config_as_code.reader import Reader
from apps.pipelines.config_as_code.sections import sections as registered_sections
from apps.pipelines.environment import NOTHING, Environment
from apps.teams.models import slug_validator


@dataclass(frozen=True)
class Document:
    team: str
    team_line: int
    # Only the sections present in the file; a missing section is left unmanaged.
    sections: dict[str, Any]


def parse_document(text: str, *, environment: Environment = NOTHING) -> Document:
    """Validate a file completely; raise ConfigInvalid listing every error by line.

    ``environment`` is what the file may read of the server's environment: nothing
    unless the caller says (the command line reads any variable).
    """
    root, errors = load_yaml(text)
    reader = Reader(errors, environment=environment)
    known = registered_sections()
    keys = ("team", *(section.key for section in known))
    entries = reader.mapping(root, what="the file", keys=keys, required=("team",)) or {}
    team, team_line = "", root.line
    if "team" in entries:
        team = reader.text(entries["team"], max_length=50, check=slug_validator) or ""
        team_line = entries["team"].value.line
    sections = {
        section.key: section.parse(entries[section.key], reader)
        for section in known
        if section.key in entries
    }
    if reader.errors:
        raise ConfigInvalid(reader.errors)
    return Document(team=team, team_line=team_line, sections=sections)
