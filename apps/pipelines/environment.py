"""Which of the server's environment variables a configuration file may read.

A file may name a variable rather than hold a secret (a webhook's ``secret_env``).
``manage.py budgets apply`` runs on the server, for its operator, and reads any
variable. A file uploaded in the browser is written by any member of any team (anyone
may sign up): reading the web process's environment for it would hand out the server's
own secrets, and its errors would tell which variables exist. It may only name
variables whose names start with a prefix the operator allowed in
``CONFIG_SECRET_ENV_PREFIXES``, for every team (``PREFIX``) or one (``team-slug=PREFIX``);
any other name is never looked up.

Read by ``budgets_site/settings.py`` (``secret_env_prefix``) before the apps are loaded:
no model is imported here.
"""

import os
import re
from dataclasses import dataclass

from django.conf import settings

from apps.core.team_scoped import TeamScoped, team_scoped

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def secret_env_prefix(entry: str) -> TeamScoped:
    """One entry of ``CONFIG_SECRET_ENV_PREFIXES``; ValueError when it is not one."""
    scoped = team_scoped(entry)
    if not ENV_NAME.fullmatch(scoped.value):
        raise ValueError(
            f"“{entry}” does not start variable names (letters, digits and _, not starting "
            "with a digit)"
        )
    return scoped


@dataclass(frozen=True)
class Environment:
    # Names starting with one of these may be read; None: any name.
    prefixes: tuple[str, ...] | None

    def readable(self, name: str) -> bool:
        return self.prefixes is None or name.startswith(self.prefixes)

    def read(self, name: str) -> str | None:
        """The variable's value, None when it is not set; only for a readable name."""
        if not self.readable(name):
            raise PermissionError(f"{name} is not to be read here")
        return os.environ.get(name)


COMMAND_LINE = Environment(prefixes=None)
NOTHING = Environment(prefixes=())


def environment_for_team(*, team_slug: str) -> Environment:
    """What a file applied in the browser for this team may read."""
    entries = (secret_env_prefix(entry) for entry in settings.CONFIG_SECRET_ENV_PREFIXES)
    return Environment(
        prefixes=tuple(entry.value for entry in entries if entry.applies_to(team_slug))
    )
