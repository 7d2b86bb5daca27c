"""Operator settings whose entries hold for every team or for one: ``VALUE`` or
``team-slug=VALUE``.

An allowance an operator makes for one team (its in-cluster receiver, its secrets'
variables) must never help another: anyone may sign up and make a team. These are read
by ``budgets_site/settings.py`` before the apps are loaded, so no model is imported here.
"""

import re
from dataclasses import dataclass

# A team's slug, as apps.teams.models.slug_validator has it.
_TEAM_SLUG = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?")


@dataclass(frozen=True)
class TeamScoped:
    team: str | None  # None: every team
    value: str

    def applies_to(self, team_slug: str | None) -> bool:
        return self.team is None or self.team == team_slug


def team_scoped(entry: str) -> TeamScoped:
    """``entry`` split into its team, if it names one, and its value; ValueError for a
    team that is not a slug."""
    team, equals, value = entry.partition("=")
    if not equals:
        return TeamScoped(None, entry.strip())
    team = team.strip()
    if not _TEAM_SLUG.fullmatch(team):
        raise ValueError(f"“{team}” before “=” is not a team's slug")
    return TeamScoped(team, value.strip())
