"""The host's own addresses: every address of every interface in the gateway's network
namespace, as Linux lists them over rtnetlink (RTM_GETADDR), read afresh for each connection the
proxy decides (a service listening on 0.0.0.0 answers on each). Elsewhere (macOS, whose kernels'
destinations are not checked) the list is empty."""

from __future__ import annotations

import ipaddress
import socket
import struct
import sys

from loomgate.gateway.sandbox.network.public_addresses import Address, judged

__all__ = ["host_addresses"]

RTM_NEWADDR = 20
RTM_GETADDR = 22
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
IFA_ADDRESS = 1
IFA_LOCAL = 2  # on a point-to-point link, IFA_ADDRESS is the peer's
HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
IFADDRMSG = struct.Struct("=BBBBI")  # family, prefix length, flags, scope, interface index
RTATTR = struct.Struct("=HH")  # length, type
SEQUENCE = 1


def host_addresses() -> frozenset[Address]:
    """Return the host's own addresses (IPv4-mapped ones as their IPv4); OSError when the
    kernel will not list them."""
    if not sys.platform.startswith("linux"):
        return frozenset()
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        sock.bind((0, 0))
        body = IFADDRMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
        flags = NLM_F_REQUEST | NLM_F_DUMP
        sock.send(HEADER.pack(HEADER.size + len(body), RTM_GETADDR, flags, SEQUENCE, 0) + body)
        found: set[Address] = set()
        while True:
            data = sock.recv(1 << 16)
            if not data:
                raise OSError("rtnetlink ended its list of addresses early")
            for kind, message in messages(data):
                if kind == NLMSG_DONE:
                    return frozenset(found)
                if kind == NLMSG_ERROR:
                    (code,) = struct.unpack_from("=i", message)
                    raise OSError(-code, "rtnetlink refused to list the addresses")
                if kind == RTM_NEWADDR:
                    address = address_of(message)
                    if address is not None:
                        found.add(judged(address))


def messages(data: bytes) -> list[tuple[int, bytes]]:
    """Return the (type, body) of each netlink message in `data`."""
    found = []
    offset = 0
    while offset + HEADER.size <= len(data):
        length, kind, _, _, _ = HEADER.unpack_from(data, offset)
        if length < HEADER.size or offset + length > len(data):
            raise OSError("rtnetlink sent a message that does not fit its length")
        found.append((kind, data[offset + HEADER.size : offset + length]))
        offset += (length + 3) & ~3
    return found


def address_of(message: bytes) -> Address | None:
    """Return the local address an RTM_NEWADDR body names (None: not IPv4 or IPv6)."""
    sizes: dict[int, int] = {socket.AF_INET: 4, socket.AF_INET6: 16}
    size = sizes.get(message[0])
    if size is None:
        return None
    attributes: dict[int, bytes] = {}
    offset = IFADDRMSG.size
    while offset + RTATTR.size <= len(message):
        length, kind = RTATTR.unpack_from(message, offset)
        if length < RTATTR.size:
            break
        attributes[kind] = message[offset + RTATTR.size : offset + length]
        offset += (length + 3) & ~3
    raw = attributes.get(IFA_LOCAL) or attributes.get(IFA_ADDRESS)
    if raw is None or len(raw) != size:
        return None
    return ipaddress.ip_address(raw)
