from typing import Any

import yaml

from apps.pipelines.config_as_code.sections import sections
from apps.pipelines.config_as_code.steps import ExportOptions
from apps.teams.models import Team


class _Dumper(yaml.SafeDumper):
    # Indent list items under their key, as people write them by hand.
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


# YAML folds these line breaks when reading plain or single-quoted text; escape them.
_FOLDED_BREAKS = frozenset("\r\x85\u2028\u2029")


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = None
    if _FOLDED_BREAKS.intersection(value):
        style = '"'
    elif "\n" in value:
        style = "|"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def dump_yaml(data: Any) -> str:
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=4096,
    )


def config_export(*, team: Team, masked: bool = True) -> str:
    """The team's configuration in the file format; applying it back changes nothing.

    Unless told it is not ``masked`` (for owners and editors, and the command line),
    webhook URLs are in the form viewers see; applying that form keeps the stored URL.
    """
    data: dict[str, Any] = {"team": team.slug}
    options = ExportOptions(masked=masked)
    for section in sections():
        value = section.export(team, options)
        if value is not None:
            data[section.key] = value
    return dump_yaml(data)
