"""A connection's first message to a kernel's proxy socket, and the client socket a sandbox's
bridge hands over in it (`bridge.py`): one byte with one fd (SCM_RIGHTS), served as the client
only when the fd is a connected TCP socket over IPv4 or IPv6.

The fd comes from inside the sandbox, so nothing about it is trusted: every fd received is
close-on-exec and is closed unless it is that one socket, including those past the first and
those of a message the OS cut short (MSG_CTRUNC: it closes the ones that did not fit); a sender
that keeps a copy shares the socket's open file, so the proxy never blocks on it (`relay.py`).
Nothing is ever sent the other way. A stream socket carries no fd without a byte (the OS drops
it), and fds sent after the first message are dropped too: the proxy reads the rest without
room for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
from array import array
from typing import NamedTuple

from loomgate.gateway.sandbox.network.relay import ready

__all__ = ["HANDED", "FirstMessage", "first_message", "handed_socket", "refusal"]

HANDED = b"\0"  # the byte the bridge's fd travels with
MAX_FDS = 8  # room for this many fds in the first message; the OS closes any beyond
FD_SIZE = array("i").itemsize
CLOEXEC = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
FAMILIES: dict[int, str] = {socket.AF_INET: "IPv4", socket.AF_INET6: "IPv6"}


class FirstMessage(NamedTuple):
    """What a connection sent first: its bytes, the fds that came with them (the receiver's to
    close) and whether the OS cut the fds short."""

    data: bytes
    fds: list[int]
    truncated: bool


async def first_message(conn: socket.socket, timeout: float) -> FirstMessage:
    """Return the first message `conn` sends (b"": it ended); TimeoutError after `timeout`
    seconds. Cancelled, it has received nothing: the fds are never between two awaits."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    space = socket.CMSG_SPACE(MAX_FDS * FD_SIZE)
    while True:
        try:
            data, ancillary, flags, _ = conn.recvmsg(65536, space, CLOEXEC | socket.MSG_DONTWAIT)
            break
        except BlockingIOError:
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError("no first message") from None
            await asyncio.wait_for(ready(conn, writing=False), left)
    fds = array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % FD_SIZE])
    return FirstMessage(data, list(fds), bool(flags & socket.MSG_CTRUNC))


def handed_socket(message: FirstMessage) -> socket.socket:
    """Return the client socket `message` hands over, non-blocking and close-on-exec, its fd
    now the socket's; ValueError, with every fd closed, when it is not one byte with one
    connected TCP socket."""
    fds = message.fds
    try:
        if message.truncated or len(fds) != 1:
            raise ValueError(f"a hand-over carries one fd, not {len(fds)} or more")
        if message.data != HANDED:
            raise ValueError(f"a hand-over is the byte {HANDED!r} alone, not {message.data!r}")
        why = refusal(fds[0])
        if why is not None:
            raise ValueError(f"the fd handed over is {why}")
        sock = socket.socket(fileno=fds[0])
    except BaseException:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    os.set_inheritable(sock.fileno(), False)  # where the OS has no MSG_CMSG_CLOEXEC
    sock.setblocking(False)
    return sock


def refusal(fd: int) -> str | None:
    """Return what `fd` is when it is not a connected TCP socket over IPv4 or IPv6 (None when
    it is one); `fd` stays open."""
    if not stat.S_ISSOCK(os.fstat(fd).st_mode):
        return "not a socket"
    try:
        probe = socket.socket(fileno=fd)
    except OSError as error:
        return f"a socket whose kind cannot be read ({error.strerror})"
    try:
        family = probe.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)
        if family not in FAMILIES:
            return f"a socket of family {family}, not IPv4 or IPv6"
        if probe.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) != socket.SOCK_STREAM:
            return f"an {FAMILIES[family]} socket that is not a stream"
        if probe.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL) != socket.IPPROTO_TCP:
            return f"an {FAMILIES[family]} stream socket that is not TCP"
        if probe.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            return "a listening TCP socket"
        try:
            probe.getpeername()
        except OSError:
            return "a TCP socket that is not connected"
        return None
    except OSError as error:
        return f"a socket whose kind cannot be read ({error.strerror})"
    finally:
        probe.detach()
