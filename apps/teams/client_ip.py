"""The address a request came from, for throttling sign-ups and failed sign-ins.

Behind reverse proxies ``REMOTE_ADDR`` is the nearest proxy, the same for every
client; each proxy appends the address it received from to ``X-Forwarded-For``.
With ``CLIENT_IP_PROXY_COUNT`` proxies in front, the address the outermost one saw
is that many entries from the right. Entries further left are whatever the client
sent and are never trusted.
"""

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_ip_address(request: HttpRequest) -> str | None:
    """None when the request has no address at all (as for a test client's login)."""
    remote = request.META.get("REMOTE_ADDR") or None
    proxies = settings.CLIENT_IP_PROXY_COUNT
    if proxies <= 0:
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
