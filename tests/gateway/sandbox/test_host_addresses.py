"""The host's own addresses as rtnetlink lists them, against what the kernel says elsewhere:
its IPv6 addresses in /proc/net/if_inet6, its IPv4 ones by which address a socket can bind, and
the address it would send from (a UDP socket's connect, which sends nothing); and the rtnetlink
messages read, built here byte by byte, to the edges of their lengths (no socket)."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
import struct
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.network.host_addresses import address_of, host_addresses, messages

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


# rtnetlink's numbers, as <linux/netlink.h>, <linux/rtnetlink.h> and <linux/if_addr.h> give them.
DONE, ERROR, NEWLINK, NEWADDR, GETADDR = 3, 2, 16, 20, 22
ADDRESS, LOCAL, LABEL = 1, 2, 3  # IFA_ADDRESS (the peer's on a point-to-point link), IFA_LOCAL
AF_INET, AF_INET6, AF_PACKET = 2, 10, 17


def message(kind: int, body: bytes = b"", length: int | None = None) -> bytes:
    """Return one netlink message (its header says `length`, else its true one), padded to 4."""
    size = 16 + len(body)
    whole = struct.pack("=IHHII", size if length is None else length, kind, 0, 1, 0) + body
    return whole + bytes(-size % 4)


def attribute(kind: int, payload: bytes, length: int | None = None) -> bytes:
    """Return one rtattr (its header says `length`, else its true one), padded to 4."""
    size = 4 + len(payload)
    return struct.pack("=HH", size if length is None else length, kind) + payload + bytes(-size % 4)


def ifaddr(family: int, *attributes: bytes) -> bytes:
    """Return an RTM_NEWADDR body: an ifaddrmsg (prefix 8, interface 1) and its attributes."""
    return struct.pack("=BBBBI", family, 8, 0, 0, 1) + b"".join(attributes)


def ip(text: str) -> bytes:
    """Return the bytes of the address `text`."""
    return ipaddress.ip_address(text).packed


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (b"", []),
        (message(DONE), [(DONE, b"")]),  # a header and no body ends the data exactly
        (message(DONE) + bytes(15), [(DONE, b"")]),  # less than a header after: no message
        (message(NEWADDR, b"abcde") + message(DONE, b"\0\0\0\0"),
         [(NEWADDR, b"abcde"), (DONE, b"\0\0\0\0")]),  # the next begins at a multiple of 4
        (message(NEWADDR, b"abcde")[:21], [(NEWADDR, b"abcde")]),  # the last needs no padding
    ],
)  # fmt: skip
def test_the_messages_of_a_read(data: bytes, found: list[tuple[int, bytes]]) -> None:
    assert messages(data) == found


@pytest.mark.parametrize(
    "data",
    [
        message(DONE, length=15),  # shorter than its own header
        message(DONE, length=0),
        message(DONE, b"\0\0\0\0", length=24),  # longer than what was read
        message(DONE) + message(DONE, b"\0\0\0\0", length=21),
    ],
)
def test_a_message_that_does_not_fit_its_length_is_refused(data: bytes) -> None:
    with pytest.raises(OSError) as refused:
        messages(data)
    assert str(refused.value) == "rtnetlink sent a message that does not fit its length"


@pytest.mark.parametrize(
    ("body", "address"),
    [
        (ifaddr(AF_INET, attribute(ADDRESS, ip("10.0.0.5"))), "10.0.0.5"),
        (ifaddr(AF_INET6, attribute(ADDRESS, ip("fd00::1"))), "fd00::1"),
        # on a point-to-point link the local address is IFA_LOCAL, in either order
        (ifaddr(AF_INET, attribute(ADDRESS, ip("10.0.0.1")), attribute(LOCAL, ip("10.0.0.2"))),
         "10.0.0.2"),
        (ifaddr(AF_INET, attribute(LOCAL, ip("10.0.0.2")), attribute(ADDRESS, ip("10.0.0.1"))),
         "10.0.0.2"),
        # a label of 7 bytes is padded to 8 before the next attribute
        (ifaddr(AF_INET, attribute(LABEL, b"eth0\0"), attribute(LOCAL, ip("10.0.0.2"))),
         "10.0.0.2"),
        (ifaddr(AF_INET, attribute(LABEL, b"lo\0"), attribute(LOCAL, ip("127.0.0.1"))),
         "127.0.0.1"),
        # an attribute of only its header is read, the message's last too
        (ifaddr(AF_INET, attribute(LABEL, b""), attribute(ADDRESS, ip("10.0.0.5"))), "10.0.0.5"),
        (ifaddr(AF_INET, attribute(ADDRESS, ip("10.0.0.5")), attribute(ADDRESS, b"")), None),
        # an attribute shorter than its header ends the reading, keeping what came before
        (ifaddr(AF_INET, attribute(ADDRESS, ip("10.0.0.5")), attribute(LOCAL, b"", length=3)),
         "10.0.0.5"),
        (ifaddr(AF_INET, attribute(LOCAL, b"", length=0), attribute(ADDRESS, ip("10.0.0.5"))),
         None),
        # no address, one of the wrong size, or a family that is not IP: none
        (ifaddr(AF_INET, attribute(LABEL, b"lo\0")), None),
        (ifaddr(AF_INET), None),
        (ifaddr(AF_INET, attribute(ADDRESS, ip("fd00::1"))), None),
        (ifaddr(AF_INET6, attribute(ADDRESS, ip("10.0.0.5"))), None),
        (ifaddr(AF_PACKET, attribute(ADDRESS, ip("10.0.0.5"))), None),
    ],
)  # fmt: skip
def test_the_address_an_rtm_newaddr_names(body: bytes, address: str | None) -> None:
    assert address_of(body) == (None if address is None else ipaddress.ip_address(address))


class Netlink:
    """A stand-in for the rtnetlink socket: what it is bound to and sent, and its reads."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads
        self.bound: object = None
        self.sent: list[bytes] = []

    def __enter__(self) -> Netlink:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def bind(self, address: object) -> None:
        self.bound = address

    def send(self, data: bytes) -> int:
        self.sent.append(data)
        return len(data)

    def recv(self, size: int) -> bytes:
        return self.reads.pop(0)


def listed(monkeypatch: pytest.MonkeyPatch, *reads: bytes) -> tuple[Netlink, object]:
    """Return the stand-in socket after host_addresses() read `reads`, and what it returned
    (or the OSError it raised)."""
    netlink = Netlink(list(reads))
    with monkeypatch.context() as patched:
        patched.setattr(socket, "socket", lambda *_: netlink)
        try:
            return netlink, host_addresses()
        except OSError as error:
            return netlink, error


# RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, sequence 1, and an ifaddrmsg of zeros: every family's
# addresses on every interface.
REQUEST = struct.pack("=IHHII", 24, GETADDR, 0x301, 1, 0) + bytes(8)


def test_the_list_is_asked_for_and_read_to_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    first = (
        message(NEWADDR, ifaddr(AF_INET, attribute(LOCAL, ip("127.0.0.1"))))
        + message(NEWLINK, ifaddr(AF_INET, attribute(LOCAL, ip("10.9.9.9"))))  # not an address
        + message(NEWADDR, ifaddr(AF_INET6, attribute(ADDRESS, ip("::1"))))
    )
    second = (
        message(NEWADDR, ifaddr(AF_PACKET, attribute(ADDRESS, ip("10.8.8.8"))))
        + message(NEWADDR, ifaddr(AF_INET6, attribute(ADDRESS, ip("::ffff:10.0.0.5"))))
        + message(DONE, b"\0\0\0\0")
        + message(NEWADDR, ifaddr(AF_INET, attribute(LOCAL, ip("10.7.7.7"))))  # after the end
    )
    netlink, found = listed(monkeypatch, first, second)
    assert found == frozenset(ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "10.0.0.5"))
    # port id 0 (one the kernel picks, free), in no multicast group
    assert (netlink.bound, netlink.sent) == ((0, 0), [REQUEST])


@pytest.mark.parametrize(
    ("reads", "errno_", "said"),
    [
        ([b""], None, "rtnetlink ended its list of addresses early"),
        ([message(NEWADDR, ifaddr(AF_INET, attribute(LOCAL, ip("127.0.0.1")))),
          message(ERROR, struct.pack("=i", -errno.EACCES) + REQUEST[:16])],
         errno.EACCES, f"[Errno {errno.EACCES}] rtnetlink refused to list the addresses"),
        ([message(ERROR, struct.pack("=i", -errno.EPERM) + REQUEST[:16])],
         errno.EPERM, f"[Errno {errno.EPERM}] rtnetlink refused to list the addresses"),
        ([message(DONE, length=40)], None, "rtnetlink sent a message that does not fit its length"),
    ],
)  # fmt: skip
def test_a_list_the_kernel_cuts_short_or_refuses_raises(
    monkeypatch: pytest.MonkeyPatch, reads: list[bytes], errno_: int | None, said: str
) -> None:
    _, raised = listed(monkeypatch, *reads)
    assert isinstance(raised, OSError)
    assert (raised.errno, str(raised)) == (errno_, said)
