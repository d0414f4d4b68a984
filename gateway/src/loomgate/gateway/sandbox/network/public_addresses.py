"""Which addresses are public: the ranges a kernel never reaches unless its profile names them
(loopback, private, link-local, CGNAT, multicast, reserved), and how an address or range is
judged (an IPv4-mapped IPv6 address as its IPv4; NAT64 and 6to4 forms by the IPv4 they carry)."""

from __future__ import annotations

import ipaddress
from typing import TypeAlias

__all__ = ["Address", "Network", "all_public", "judged", "non_public", "v4_if_mapped", "within"]

Address: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
Network: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network


def nets(*texts: str) -> tuple[Network, ...]:
    """Return the ranges `texts` write."""
    return tuple(ipaddress.ip_network(text) for text in texts)


# What is not public, most specific first; the label goes into the refusal's sentence. IPv6
# outside 2000::/3 is reserved as a whole, and the fallback catches what Python's own
# registry calls non-global.
NON_PUBLIC: tuple[tuple[str, tuple[Network, ...]], ...] = (
    ("unspecified", nets("0.0.0.0/8", "::/128")),
    ("broadcast", nets("255.255.255.255/32")),
    ("loopback", nets("127.0.0.0/8", "::1/128")),
    ("private", nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")),
    ("link-local", nets("169.254.0.0/16", "fe80::/10")),
    ("CGNAT", nets("100.64.0.0/10")),
    ("multicast", nets("224.0.0.0/4", "ff00::/8")),
    ("site-local", nets("fec0::/10")),
    ("documentation", nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")),
    ("documentation", nets("2001:db8::/32", "3fff::/20")),
    ("benchmarking", nets("198.18.0.0/15")),
    ("reserved", nets("240.0.0.0/4", "192.0.0.0/24", "192.88.99.0/24")),
    ("reserved", nets("64:ff9b:1::/48", "100::/64", "2001::/23", "5f00::/16")),
)
GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")


def v4_if_mapped(network: Network) -> Network:
    """Return an IPv4-mapped IPv6 range as its IPv4 range (how decide() judges the address)."""
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(MAPPED):
        v4 = network.network_address.ipv4_mapped
        assert v4 is not None
        return ipaddress.IPv4Network((v4, network.prefixlen - 96))
    return network


def judged(address: Address) -> Address:
    """Return the address decide() judges: an IPv4-mapped IPv6 address is its IPv4."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def non_public(address: Address) -> str | None:
    """Return "a private address" (or another range's) when `address` is not public, else
    None; `address` as judged()."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.sixtofour or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in NAT64 else None
        )
        if embedded is not None:
            inner = non_public(embedded)
            return None if inner is None else f"a form of {embedded}, {inner}"
    for label, networks in NON_PUBLIC:
        if any(address in network for network in networks):
            return f"{'an' if label[0] in 'aeiou' else 'a'} {label} address"
    if not address.is_global or (address.version == 6 and address not in GLOBAL_UNICAST_V6):
        return "a reserved address"
    return None


def all_public(network: Network) -> bool:
    """Return whether every address of `network` is public (conservative: IPv6 forms that
    carry an IPv4 count as not public)."""
    if network.version == 6 and not within(network, GLOBAL_UNICAST_V6):
        return False
    carriers = nets("2002::/16", str(NAT64))
    ranges = [n for _, networks in NON_PUBLIC for n in networks] + list(carriers)
    return not any(network.overlaps(other) for other in ranges if other.version == network.version)


def within(inner: Network, outer: Network) -> bool:
    """Return whether `inner` lies inside `outer` (never across IP versions)."""
    if isinstance(inner, ipaddress.IPv4Network) and isinstance(outer, ipaddress.IPv4Network):
        return inner.subnet_of(outer)
    if isinstance(inner, ipaddress.IPv6Network) and isinstance(outer, ipaddress.IPv6Network):
        return inner.subnet_of(outer)
    return False
