"""Receivers an operator lets webhooks reach whatever address they resolve to
(``WEBHOOK_ALLOWED_HOSTS``): an in-cluster Alertmanager, a service on the private network.

An entry is ``scheme://host:port`` for every team, or ``team-slug=scheme://host:port`` for
one team only. A webhook passes when its URL's scheme, host and port all match an entry
that holds for its team; the path is not part of a rule. A bare host, the form before
rules had a scheme and a port, stops the process at start-up with the form to write:
read as "any scheme, any port" it would let every team reach every service on that host.

Read by ``budgets_site/settings.py`` before the apps are loaded: no model is imported here.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from apps.core.team_scoped import team_scoped

DEFAULT_PORTS = {"http": 80, "https": 443}


def host_key(host: str) -> str:
    """A host as rules and URLs are compared: lowercase, no brackets, no trailing dot."""
    return host.removeprefix("[").removesuffix("]").rstrip(".").lower()


def origin_text(scheme: str, host: str, port: int) -> str:
    """``scheme://host:port`` as an entry is written, IPv6 literals in brackets."""
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


@dataclass(frozen=True)
class HostRule:
    team: str | None  # None: every team
    scheme: str
    host: str
    port: int

    def allows(self, *, team_slug: str | None, scheme: str, host: str, port: int) -> bool:
        if self.team is not None and self.team != team_slug:
            return False
        return (self.scheme, self.host, self.port) == (scheme, host_key(host), port)


def _bare(entry: str, host: str) -> ValueError:
    # An IPv6 literal written without brackets has no port to tell apart.
    netloc = f"[{host}]" if host.count(":") > 1 and not host.startswith("[") else host
    try:
        parts = urlsplit(f"//{netloc}")
        example = origin_text("https", host_key(parts.hostname or "host"), parts.port or 443)
    except ValueError:
        example = "https://host:443"
    return ValueError(
        f"“{entry}” is a bare host: write the scheme, host and port a webhook may reach, "
        f"such as {example} (or team-slug={example} for one team only)"
    )


def host_rule(entry: str) -> HostRule:
    """One entry of the setting; ValueError saying what is wrong and what to write."""
    scoped = team_scoped(entry)
    text = scoped.value
    if "://" not in text:
        raise _bare(entry, text)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"“{entry}” is not scheme://host:port ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"“{entry}”: the scheme is http or https, not “{parts.scheme}”")
    if not parts.hostname:
        raise ValueError(f"“{entry}” names no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username is not None:
        raise ValueError(
            f"“{entry}” has more than scheme://host:port: a rule holds for every path on "
            "that port, and credentials belong in the channel's URL"
        )
    return HostRule(scoped.team, scheme, host_key(parts.hostname), port or DEFAULT_PORTS[scheme])


def hosts_allow(
    entries: Iterable[str], *, team_slug: str | None, scheme: str, host: str, port: int
) -> bool:
    """Whether an entry lets this team's webhook reach ``scheme://host:port``."""
    return any(
        host_rule(entry).allows(team_slug=team_slug, scheme=scheme, host=host, port=port)
        for entry in entries
    )


def allow_advice(*, scheme: str, host: str, port: int, team_slug: str | None) -> str:
    """How an operator lets a refused receiver through: the two server settings, the
    entry to write (for this team only, where the team is known), and that the
    processes read them at start."""
    origin = origin_text(scheme, host_key(host), port)
    entry, reach = (
        (f"{team_slug}={origin}", "this team only")
        if team_slug
        else (
            origin,
            "every team",
        )
    )
    return (
        f"An operator can allow it with a server setting: add {entry} to "
        f"WEBHOOK_ALLOWED_HOSTS ({reach}), or set WEBHOOK_ALLOW_PRIVATE_IPS=true (every "
        "address, every team); the web and worker processes read these at start, so "
        "restart them after the change."
    )
