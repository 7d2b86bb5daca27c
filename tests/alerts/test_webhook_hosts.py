"""WEBHOOK_ALLOWED_HOSTS: each entry is scheme://host:port, for every team or one, and a
bare host stops the process at start-up with the form to write."""

import re
from pathlib import Path

import pytest

from apps.alerts.webhook_hosts import HostRule, host_rule, hosts_allow
from tests.core.test_settings import _manage

RULE = "https://hooks.internal:8443"


def _allows(entries: list[str], url: tuple[str, str, int], team: str | None = "acme") -> bool:
    scheme, host, port = url
    return hosts_allow(entries, team_slug=team, scheme=scheme, host=host, port=port)


def test_an_entry_allows_its_scheme_host_and_port_and_nothing_else_on_that_host():
    assert _allows([RULE], ("https", "hooks.internal", 8443))
    # Hosts compare as DNS names do: case and a trailing dot make no difference.
    assert _allows([RULE], ("https", "HOOKS.Internal.", 8443))
    assert not _allows([RULE], ("http", "hooks.internal", 8443))
    assert not _allows([RULE], ("https", "hooks.internal", 443))
    assert not _allows([RULE], ("https", "other.internal", 8443))


def test_a_port_left_out_is_the_schemes_own():
    assert host_rule("https://hooks.internal") == HostRule(None, "https", "hooks.internal", 443)
    assert host_rule("http://[FD00::1]/") == HostRule(None, "http", "fd00::1", 80)


def test_a_teams_entry_holds_for_that_team_only():
    entries = [f"acme={RULE}"]

    assert _allows(entries, ("https", "hooks.internal", 8443), team="acme")
    assert not _allows(entries, ("https", "hooks.internal", 8443), team="globex")
    assert not _allows(entries, ("https", "hooks.internal", 8443), team=None)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("hooks.internal", "is a bare host: write the scheme, host and port a webhook may "
         "reach, such as https://hooks.internal:443 (or team-slug=https://hooks.internal:443 "
         "for one team only)"),
        ("hooks.internal:9093", "such as https://hooks.internal:9093"),
        ("::1", "such as https://[::1]:443"),
        ("https://hooks.internal:8443/alerts", "has more than scheme://host:port"),
        ("https://user:pw@hooks.internal:8443", "has more than scheme://host:port"),
        ("ftp://hooks.internal:21", "the scheme is http or https, not “ftp”"),
        ("Acme=https://hooks.internal:8443", "“Acme” before “=” is not a team's slug"),
        ("https://hooks.internal:99999", "is not scheme://host:port"),
    ],
)  # fmt: skip
def test_an_entry_that_is_not_scheme_host_port_says_what_to_write(entry: str, message: str):
    with pytest.raises(ValueError, match=re.escape(message)):
        host_rule(entry)


def test_entries_in_the_new_form_start(tmp_path: Path) -> None:
    result = _manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.WEBHOOK_ALLOWED_HOSTS)",
        tmp_path=tmp_path,
        embedded=True,
        DEBUG="true",
        WEBHOOK_ALLOWED_HOSTS="https://hooks.internal:8443,acme=http://am.internal:9093",
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "['https://hooks.internal:8443', 'acme=http://am.internal:9093']"
    )
