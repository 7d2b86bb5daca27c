"""Which addresses a webhook may connect to: only globally routable ones, unless allowed.

Any team can enter any URL, so a webhook must not become a way into our own network
(the cloud metadata service at 169.254.169.254, a database on 10.x, the worker's own
loopback). IPv6 forms that carry an IPv4 address where it can be read (IPv4-mapped,
6to4, the well-known NAT64 prefix) are judged by the IPv4 address they lead to; those
where it cannot be trusted are refused as a whole.
"""

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

_SHARED = IPv4Network("100.64.0.0/10")  # carrier-grade NAT, RFC 6598
_UNIQUE_LOCAL = IPv6Network("fc00::/7")
# The well-known NAT64 prefix (RFC 6052): a translator reaches the IPv4 address in the
# last 32 bits.
_NAT64 = IPv6Network("64:ff9b::/96")
# Ranges refused whatever IPv4 address their bits seem to hold. Local-use NAT64 (RFC
# 8215) is a network's own translators, with prefixes of any length inside the /48, so
# the IPv4 address need not be in the last 32 bits; Teredo (RFC 4380) reaches a host
# behind NAT through relays, its IPv4 address obfuscated.
_REFUSED_WHOLE = (
    (IPv6Network("64:ff9b:1::/48"), "local-use NAT64"),
    (IPv6Network("2001::/32"), "Teredo"),
)


def _embedded_ipv4(ip: IPv6Address) -> tuple[str, IPv4Address] | None:
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip in _NAT64:
        return "NAT64", IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_class(ip: IPv4Address | IPv6Address) -> str | None:
    """What keeps ``ip`` from being a webhook target ("private", "loopback", …); None
    for a globally routable address."""
    if isinstance(ip, IPv6Address):
        for network, name in _REFUSED_WHOLE:
            if ip in network:
                return name
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            form, inner = embedded
            inner_class = address_class(inner)
            return f"{form} {inner_class}" if inner_class else None
    # Most specific first: 127.0.0.1 is also "private" to the ipaddress module.
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, IPv4Address) and ip in _SHARED:
        return "shared (carrier-grade NAT)"
    if isinstance(ip, IPv6Address) and ip.is_site_local:
        return "site-local"
    if isinstance(ip, IPv6Address) and ip in _UNIQUE_LOCAL:
        return "unique local"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "non-global"
    return None


def with_article(address_kind: str) -> str:
    return ("an " if address_kind.startswith(("unspecified", "IPv4")) else "a ") + address_kind


def parse_ip(text: str) -> IPv4Address | IPv6Address | None:
    """``text`` as an IP address (brackets and an IPv6 zone allowed), or None."""
    try:
        return ip_address(text.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None
