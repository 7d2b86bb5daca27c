"""The address a request came from, for throttling sign-ups and failed sign-ins.

Behind reverse proxies ``REMOTE_ADDR`` is the nearest proxy, the same for every
client; each proxy appends the address it received from to ``X-Forwarded-For``.
With ``CLIENT_IP_PROXY_COUNT`` proxies in front, the address the outermost one saw
is that many entries from the right. Entries further left are whatever the client
sent and are never trusted.
"""

import ipaddress
import logging

from django.conf import settings
from django.http import HttpRequest

logger = logging.getLogger(__name__)
_warned: list[bool] = []


def client_ip_address(request: HttpRequest) -> str | None:
    """None when the request has no address at all (as for a test client's login)."""
    remote = request.META.get("REMOTE_ADDR") or None
    proxies = settings.CLIENT_IP_PROXY_COUNT
    if proxies <= 0:
        if "HTTP_X_FORWARDED_FOR" in request.META and not _warned:
            _proxy_count_warn(remote)
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    hops = [hop for hop in hops if hop]
    if len(hops) < proxies:
        # Fewer entries than proxies: the header did not come through them all.
        return remote
    candidate = hops[-proxies]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote


def _proxy_count_warn(remote: str | None) -> None:
    """Once per process: a proxy seems to be in front, yet every client is counted as it."""
    _warned.append(True)
    logger.error(
        "X-Forwarded-For arrives from %s but CLIENT_IP_PROXY_COUNT is 0: every client "
        "behind a proxy is counted as the proxy's address in the sign-in and sign-up "
        "limits, and one client's wrong passwords lock a username out for all. Set "
        "CLIENT_IP_PROXY_COUNT to the number of proxies in front (docs/deployment.md); "
        "ignore this if clients reach the app directly and one sent the header itself.",
        remote,
    )
