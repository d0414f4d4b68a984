"""A profile's network rule: what `network` in sandbox.toml says, which of two rules is
stricter, whether a name may be resolved at all, and whether one outbound connection, its name
already resolved, may go.

Outside the addresses a list names by IP or range, only public addresses of other hosts are
reachable: loopback, private, link-local (the cloud metadata address 169.254.169.254 among
them), CGNAT, multicast, unspecified, broadcast and reserved ranges are refused, and so is every
address of the host itself (a service listening on 0.0.0.0 answers on each); an IPv4-mapped IPv6
address is judged as its IPv4 (NAT64 and 6to4 forms by the IPv4 they carry). A host-name pattern
reaches those addresses only, so a name that resolves to a private address is refused (DNS
rebinding). Under a list, a name no pattern names is refused before it is resolved, so that no
lookup of it leaves the host. A refusal never tells the address a name resolved to.
`*.github.com` covers every name under github.com but not github.com itself, as a TLS wildcard
does.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from loomgate.gateway.sandbox.network.public_addresses import (
    Address,
    Network,
    all_public,
    judged,
    non_public,
    v4_if_mapped,
    within,
)

__all__ = [
    "HOST_NETWORK",
    "NO_NETWORK",
    "PUBLIC",
    "NetworkPattern",
    "NetworkPolicy",
    "NetworkRefusal",
    "at_least_as_strict",
    "decide",
    "decide_name",
    "non_public",
    "parse_network",
]

NetworkKind = Literal["none", "public", "host", "list"]

FORMS = (
    "use a host name (pypi.org), a wildcard (*.github.com), an address (10.1.2.3, ::1) or a "
    "range (10.0.0.0/8, fd00::/8), each with an optional :port (pypi.org:443, [::1]:8080)"
)


@dataclass(frozen=True)
class NetworkPattern:
    """One entry of a profile's network list: a host name, a wildcard (`name` is then what
    follows `*.`) or an address range, with an optional port."""

    name: str | None = None
    wildcard: bool = False
    network: Network | None = None
    port: int | None = None

    def __str__(self) -> str:
        if self.network is None:
            host = f"*.{self.name}" if self.wildcard else str(self.name)
        elif self.network.prefixlen == self.network.max_prefixlen:
            host = str(self.network.network_address)
        else:
            host = str(self.network)
        if self.port is None:
            return host
        v6 = self.network is not None and self.network.version == 6
        return f"[{host}]:{self.port}" if v6 else f"{host}:{self.port}"

    def allows_port(self, port: int) -> bool:
        """Return whether the pattern lets `port` through (no port: any)."""
        return self.port is None or self.port == port

    def names(self, host: str) -> bool:
        """Return whether this name pattern names `host` (lower case, no trailing dot)."""
        if self.name is None:
            return False
        return host.endswith("." + self.name) if self.wildcard else host == self.name


@dataclass(frozen=True)
class NetworkPolicy:
    """What a profile's `network` says: `none`, `public` (every public address), `host` (the
    host's own network, no proxy) or `list` (the patterns)."""

    kind: NetworkKind
    patterns: tuple[NetworkPattern, ...] = ()

    def __post_init__(self) -> None:
        if (self.kind == "list") != bool(self.patterns):
            raise ValueError(f"a {self.kind!r} network policy with patterns {self.patterns}")

    @property
    def off(self) -> bool:
        """Whether the kernel has no network at all."""
        return self.kind == "none"

    @property
    def host(self) -> bool:
        """Whether the kernel shares the host's own network (the person's explicit choice)."""
        return self.kind == "host"

    @property
    def proxied(self) -> bool:
        """Whether connections go through the gateway's proxy (and decide())."""
        return self.kind in ("public", "list")

    def to_json(self) -> bool | str | list[str]:
        """Return the sandbox.toml value that parses back to this policy."""
        if self.kind == "list":
            return [str(p) for p in self.patterns]
        return "host" if self.kind == "host" else self.kind == "public"

    @classmethod
    def from_json(cls, value: object) -> NetworkPolicy:
        """Return the policy to_json() gave `value` for (ValueError for anything else)."""
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return parse_network(list(value))
        if isinstance(value, bool | str):
            return parse_network(value)
        raise ValueError(f"a stored network rule must be a bool, a str or a list: {value!r}")

    def describe(self) -> str:
        """Return a short text for status: "every public address", "pypi.org, *.github.com"."""
        if self.kind == "list":
            return ", ".join(str(p) for p in self.patterns)
        return {
            "none": "no network",
            "public": "every public address",
            "host": "the host's network",
        }[self.kind]


NO_NETWORK = NetworkPolicy("none")
PUBLIC = NetworkPolicy("public")
HOST_NETWORK = NetworkPolicy("host")


@dataclass(frozen=True)
class NetworkRefusal:
    """A connection decide() refused: the sentence, and the destination it was about (a name
    asked for, never the address it resolved to; else the address asked for)."""

    reason: str
    profile: str
    host: str | None  # the name asked for; None when an address was asked for
    address: str | None  # the address asked for; None when a name was
    port: int

    @property
    def destination(self) -> str:
        """Return "pypi.org:443" for a name, "10.0.0.5:443" or "[fd00::1]:80" for an address."""
        if self.host is not None:
            return f"{self.host}:{self.port}"
        where = str(self.address)
        return f"[{where}]:{self.port}" if ":" in where else f"{where}:{self.port}"


def parse_network(value: bool | str | list[str]) -> NetworkPolicy:
    """Return the policy a profile's `network` value says; ValueError with one sentence when
    it says nothing valid. An empty list is no network."""
    if isinstance(value, bool):
        return PUBLIC if value else NO_NETWORK
    if isinstance(value, str):
        if value == "host":
            return HOST_NETWORK
        raise ValueError(
            f'network = {value!r} is not allowed: write true, false, "host" or a list '
            f"(network = [{value!r}])"
        )
    if not isinstance(value, list):
        raise ValueError(
            f'network must be true, false, "host" or a list of patterns, not {value!r}'
        )
    patterns: list[NetworkPattern] = []
    for text in value:
        pattern = parse_pattern(text)
        if pattern not in patterns:
            patterns.append(pattern)
    return NetworkPolicy("list", tuple(patterns)) if patterns else NO_NETWORK


def parse_pattern(text: object) -> NetworkPattern:
    """Return the pattern `text` writes (ValueError naming it and the forms allowed)."""
    if not isinstance(text, str):
        raise ValueError(f"network pattern {text!r} is not a string; {FORMS}")
    if text == "host":
        raise ValueError(
            "network pattern 'host' cannot stand in a list: write network = \"host\" for the "
            "host's own network"
        )
    if text == "*":
        raise ValueError("network pattern '*' cannot stand in a list: write network = true")
    try:
        return _pattern(text)
    except ValueError as error:
        raise ValueError(f"network pattern {text!r} is not valid ({error}); {FORMS}") from None


def _pattern(text: str) -> NetworkPattern:
    bracketed = re.fullmatch(r"\[([^\]]*)\](?::([^:]*))?", text)
    if bracketed:
        host, port_text = bracketed.group(1), bracketed.group(2)
        if ":" not in host:
            raise ValueError("brackets hold an IPv6 address")
    elif text.count(":") >= 2:
        host, port_text = text, None  # an IPv6 address or range, no port
    elif ":" in text:
        host, port_text = text.rsplit(":", 1)
    else:
        host, port_text = text, None
    port = None if port_text is None else _port(port_text)
    if "/" in host:
        return NetworkPattern(network=v4_if_mapped(ipaddress.ip_network(host)), port=port)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if ":" in host:
            raise ValueError("not an IPv6 address") from None
    else:
        return NetworkPattern(network=v4_if_mapped(ipaddress.ip_network(address)), port=port)
    if host.startswith("*."):
        return NetworkPattern(name=_host_name(host[2:]), wildcard=True, port=port)
    return NetworkPattern(name=_host_name(host), port=port)


def _port(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,5}", text) or not 1 <= int(text) <= 65535:
        raise ValueError(f"the port {text!r} is not a number from 1 to 65535")
    return int(text)


def _host_name(text: str) -> str:
    if "*" in text:
        raise ValueError("a wildcard may only be the whole first label, as in *.github.com")
    if not text.isascii():
        raise ValueError("write an international name in its ASCII form, xn--…")
    name = text.lower().removesuffix(".")
    labels = name.split(".")
    if not name or len(name) > 253:
        raise ValueError("a host name has 1 to 253 characters")
    for label in labels:
        if not re.fullmatch(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?", label):
            raise ValueError(f"{label!r} is not a DNS label")
    if labels[-1].isdigit():
        raise ValueError("it looks like an IPv4 address but is not one")
    return name


def decide_name(
    policy: NetworkPolicy, *, profile: str, host: str, port: int
) -> NetworkRefusal | None:
    """Return why the name `host` is refused before it is resolved under `policy`, the rule of
    `profile` (a list that names it on no port, or not on `port`: no lookup of it leaves the
    host), or None when it may be resolved and its addresses decide()d."""
    name = host.lower().removesuffix(".")
    if policy.kind == "host":
        raise ValueError("the host's network is not proxied: decide() has nothing to check")
    if policy.kind == "none":
        return NetworkRefusal(f"profile {profile!r} has no network", profile, name, None, port)
    if policy.kind == "public":
        return None
    by_name = [p for p in policy.patterns if p.names(name)]
    if any(p.allows_port(port) for p in by_name):
        return None
    asked = f"{name} port {port}" if by_name else name
    reason = f"{asked} is not named by profile {profile!r}, which names {policy.describe()}"
    return NetworkRefusal(reason, profile, name, None, port)


def decide(
    policy: NetworkPolicy,
    *,
    profile: str,
    host: str | None,
    address: Address,
    port: int,
    own: Collection[Address],
) -> NetworkRefusal | None:
    """Return why a connection to `address`:`port` (resolved from `host`, None when an address
    was asked for) is refused under `policy`, the rule of `profile`, or None when it may go;
    `own`: the host's own addresses (as judged())."""
    checked = judged(address)
    name = None if host is None or _is_address(host) else host.lower().removesuffix(".")

    def refused(reason: str) -> NetworkRefusal:
        return NetworkRefusal(reason, profile, name, None if name else str(checked), port)

    if policy.kind == "host":
        raise ValueError("the host's network is not proxied: decide() has nothing to check")
    if policy.kind == "none":
        return refused(f"profile {profile!r} has no network")
    # A name is told as itself: what it resolved to stays the proxy's.
    said = f"{name} resolves to" if name else f"{checked} is"
    blocked = non_public(checked)
    if blocked is None and checked in own:
        blocked = "an address of this host"
    if policy.kind == "public":
        if blocked is None:
            return None
        return refused(f"{said} {blocked}, which profile {profile!r} does not name")
    by_address = [p for p in policy.patterns if p.network and checked in p.network]
    if any(p.allows_port(port) for p in by_address):
        return None
    by_name = [p for p in policy.patterns if name is not None and p.names(name)]
    if any(p.allows_port(port) for p in by_name) and blocked is None:
        return None
    if blocked is not None:
        if any(p.allows_port(port) for p in by_name):
            return refused(
                f"{said} {blocked}; profile {profile!r} names {name}, but a name reaches only "
                "public addresses of other hosts: name the address to reach it"
            )
        which = "names for other ports only" if by_address else "does not name"
        return refused(f"{said} {blocked}, which profile {profile!r} {which}")
    asked = name or str(checked)
    names = policy.describe()
    if by_name or by_address:
        return refused(
            f"{asked} port {port} is not named by profile {profile!r}, which names {names}"
        )
    return refused(f"{asked} is not named by profile {profile!r}, which names {names}")


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def at_least_as_strict(a: NetworkPolicy, b: NetworkPolicy) -> bool:
    """Return whether `a` lets a kernel reach no more than `b` does (False when unsure)."""
    if a.kind == "none" or b.kind == "host":
        return True
    if a.kind in ("host", "public") or b.kind == "none":
        return a.kind == b.kind
    if b.kind == "public":
        return all(p.network is None or all_public(p.network) for p in a.patterns)
    return all(any(_covers(q, p) for q in b.patterns) for p in a.patterns)


def _covers(wide: NetworkPattern, narrow: NetworkPattern) -> bool:
    """Return whether every destination `narrow` allows, `wide` allows too."""
    if wide.port is not None and wide.port != narrow.port:
        return False
    if narrow.network is not None:
        return wide.network is not None and within(narrow.network, wide.network)
    if wide.name is None or narrow.name is None:
        return False
    if narrow.wildcard and not wide.wildcard:
        return False
    return wide.names(narrow.name) or (
        wide.wildcard == narrow.wildcard and wide.name == narrow.name
    )
