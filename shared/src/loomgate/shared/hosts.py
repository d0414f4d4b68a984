"""Bind addresses: which of them stay on this machine (the gateway and `loomgate-mcp` ask)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Return whether `host` is a loopback address or `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
