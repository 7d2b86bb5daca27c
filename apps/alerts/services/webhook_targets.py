"""A webhook's URL checked when it is saved, by the rule its sends follow.

Whatever the door (the form, the API, a configuration file), a URL whose host is or
resolves to an address the server refuses (private, loopback, link-local, …, unless
WEBHOOK_ALLOW_PRIVATE_IPS or WEBHOOK_ALLOWED_HOSTS allow it) is refused at save, with
the setting that would allow it: otherwise the channel saves and every send fails.

A host that does not resolve now is saved with a warning, not refused: DNS may answer
later (a receiver being set up, a name only the workers' network knows), and each send
resolves the name again and is judged then. The lookup at save is bounded by
``SAVE_RESOLVE_TIMEOUT_S``, so that a slow name server holds a web request briefly.
"""

from django.conf import settings
from django.core.exceptions import ValidationError

from apps.alerts.transports.guarded_http import RequestRefused, target_check

SAVE_RESOLVE_TIMEOUT_S = 2.0


def webhook_url_clean(*, url: str, team_slug: str) -> str:
    """ "" or a warning for a host that does not resolve now; ValidationError on ``url`` for
    one that a send would refuse, naming the server setting that would allow it."""
    timeout = min(SAVE_RESOLVE_TIMEOUT_S, float(settings.WEBHOOK_CONNECT_TIMEOUT_S))
    try:
        check = target_check(url, team_slug=team_slug, timeout=timeout)
    except RequestRefused as exc:
        raise ValidationError({"url": str(exc).removeprefix("refused: ")}) from None
    if check.refusal:
        raise ValidationError({"url": check.refusal})
    if check.unresolved:
        return (
            f"The webhook's host does not resolve now ({check.unresolved}): until it does, "
            "sends to it fail and are retried, each checked again by the same rule."
        )
    return ""
