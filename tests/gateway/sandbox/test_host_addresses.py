"""The host's own addresses as rtnetlink lists them, against what the kernel says elsewhere:
its IPv6 addresses in /proc/net/if_inet6, its IPv4 ones by which address a socket can bind, and
the address it would send from (a UDP socket's connect, which sends nothing)."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.network.host_addresses import host_addresses

IF_INET6 = Path("/proc/net/if_inet6")


def bindable(address: str) -> bool:
    """Return whether a TCP socket can bind to `address` (the kernel's word: one of its own)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as sock:
        try:
            sock.bind((address, 0))
        except OSError as error:
            assert error.errno == errno.EADDRNOTAVAIL, error
            return False
    return True


def test_every_ipv6_address_of_the_kernels_list_and_no_other() -> None:
    if not IF_INET6.exists():
        pytest.skip("no IPv6 here")
    lines = IF_INET6.read_text().splitlines()
    listed = {ipaddress.IPv6Address(int(line.split()[0], 16)) for line in lines}
    assert {a for a in host_addresses() if a.version == 6} == listed


def test_every_ipv4_address_is_one_the_host_can_bind_and_sends_from() -> None:
    found = {str(a) for a in host_addresses() if a.version == 4}
    assert "127.0.0.1" in found
    assert all(bindable(address) for address in found)
    # No route out at all: nothing more to compare.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe, contextlib.suppress(OSError):
        probe.connect(("198.51.100.1", 9))  # chooses the source address; sends nothing
        assert probe.getsockname()[0] in found
    stranger = "198.51.100.77"
    assert not bindable(stranger) and stranger not in found
