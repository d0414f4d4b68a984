"""A connection's first message to the proxy socket and the fd it hands over
(sandbox/network/handover.py): only a connected TCP socket over IPv4 or IPv6, alone with its one
byte, is taken; every other fd is closed; the fds of a message the OS cut short too; fds sent
without the byte never arrive; a timeout or a cancel leaves nothing open. On real fds of this
process: pipes, files, unix, UDP and TCP sockets over 127.0.0.1 and ::1."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.network.handover import (
    HANDED,
    MAX_FDS,
    FirstMessage,
    first_message,
    handed_socket,
    refusal,
)
from tests.support.bridges import open_fds


@contextlib.contextmanager
def tcp_pair(host: str = "127.0.0.1") -> Iterator[tuple[socket.socket, socket.socket]]:
    """Yield a TCP connection over `host`: the connecting end and the accepted one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.create_server((host, 0), family=family) as listener:
        near = socket.create_connection(listener.getsockname()[:2])
        far, _ = listener.accept()
    with near, far:
        yield near, far


@contextlib.contextmanager
def kind(name: str, tmp_path: Path) -> Iterator[int]:
    """Yield an fd of the kind `name`, open for the test's length."""
    with contextlib.ExitStack() as stack:
        if name == "pipe":
            read_end, write_end = os.pipe()
            stack.callback(os.close, write_end)
            stack.callback(os.close, read_end)
            yield read_end
        elif name == "file":
            yield stack.enter_context((tmp_path / "f").open("w")).fileno()
        elif name == "/dev/null":
            yield stack.enter_context(open(os.devnull, "rb")).fileno()  # noqa: PTH123
        elif name in ("unix stream", "unix datagram"):
            kind = socket.SOCK_STREAM if "stream" in name else socket.SOCK_DGRAM
            pair = socket.socketpair(socket.AF_UNIX, kind)
            stack.enter_context(pair[1])
            yield stack.enter_context(pair[0]).fileno()
        elif name == "UDP":
            udp = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            udp.connect(("127.0.0.1", 9))
            yield udp.fileno()
        elif name == "TCP listening":
            yield stack.enter_context(socket.create_server(("127.0.0.1", 0))).fileno()
        elif name == "TCP unconnected":
            yield stack.enter_context(socket.socket()).fileno()
        elif name in ("TCP", "TCP over IPv6"):
            pair = stack.enter_context(tcp_pair("::1" if "IPv6" in name else "127.0.0.1"))
            yield pair[1].fileno()
        else:
            raise AssertionError(name)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("pipe", "not a socket"),
        ("file", "not a socket"),
        ("/dev/null", "not a socket"),
        ("unix stream", "a socket of family 1, not IPv4 or IPv6"),
        ("unix datagram", "a socket of family 1, not IPv4 or IPv6"),
        ("UDP", "an IPv4 socket that is not a stream"),
        ("TCP listening", "a listening TCP socket"),
        ("TCP unconnected", "a TCP socket that is not connected"),
        ("TCP", None),
        ("TCP over IPv6", None),
    ],
)
def test_which_fds_are_a_client(name: str, why: str | None, tmp_path: Path) -> None:
    with kind(name, tmp_path) as fd:
        assert refusal(fd) == why
        os.fstat(fd)  # still open: refusal() only looks


def closed(fds: list[int]) -> bool:
    """Return whether every fd in `fds` is closed."""
    for fd in fds:
        try:
            os.fstat(fd)
        except OSError:
            continue
        return False
    return True


def dups(fd: int, count: int) -> list[int]:
    return [os.dup(fd) for _ in range(count)]


@pytest.mark.parametrize(
    ("message", "says"),
    [
        (lambda tcp, pipe: FirstMessage(HANDED, dups(tcp, 1), False), None),
        (lambda tcp, pipe: FirstMessage(HANDED, dups(pipe, 1), False), "is not a socket"),
        (lambda tcp, pipe: FirstMessage(HANDED, dups(tcp, 2), False), "one fd, not 2"),
        (lambda tcp, pipe: FirstMessage(HANDED, dups(tcp, 1), True), "one fd, not 1 or more"),
        (lambda tcp, pipe: FirstMessage(b"GET\0", dups(tcp, 1), False), "alone, not b'GET"),
        (lambda tcp, pipe: FirstMessage(b"", [], True), "one fd, not 0"),
    ],
)
def test_what_a_hand_over_must_be(
    message: Callable[[int, int], FirstMessage], says: str | None
) -> None:
    read_end, write_end = os.pipe()
    try:
        with tcp_pair() as (near, far):
            given = message(far.fileno(), read_end)
            if says is None:
                with handed_socket(given) as sock:
                    assert sock.fileno() == given.fds[0]
                    assert (sock.family, sock.getblocking()) == (socket.AF_INET, False)
                    assert not os.get_inheritable(sock.fileno())
                    sock.sendall(b"through the handed fd")
                    assert near.recv(100) == b"through the handed fd"
            else:
                with pytest.raises(ValueError, match=says):
                    handed_socket(given)
            assert closed(given.fds)
    finally:
        os.close(read_end)
        os.close(write_end)


def send(conn: socket.socket, data: bytes, fds: list[int]) -> int:
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
    return conn.sendmsg([data] if data else [], rights)


async def test_the_first_message_and_its_fds() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs, tcp_pair() as (_, far):
        ours.setblocking(False)
        before = open_fds()
        send(theirs, HANDED, [far.fileno()])
        got = await first_message(ours, 5.0)
        assert (got.data, len(got.fds), got.truncated) == (HANDED, 1, False)
        assert os.fstat(got.fds[0]).st_ino == os.fstat(far.fileno()).st_ino
        assert not os.get_inheritable(got.fds[0])  # close-on-exec from its arrival
        os.close(got.fds[0])
        # More fds than there is room for: the OS closes those past the room, and says so.
        send(theirs, HANDED, [far.fileno()] * (MAX_FDS + 5))
        got = await first_message(ours, 5.0)
        assert got.truncated and len(got.fds) <= MAX_FDS + 1
        for fd in got.fds:
            os.close(fd)
        # Fds without a byte do not travel on a stream socket: what comes is the next bytes.
        assert send(theirs, b"", [far.fileno()]) == 0
        theirs.sendall(b"GET")
        assert await first_message(ours, 5.0) == FirstMessage(b"GET", [], False)
        assert open_fds() == before


async def test_a_timeout_or_a_cancel_leaves_nothing() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        before = open_fds()
        with pytest.raises(TimeoutError):
            await first_message(ours, 0.05)
        waiting = asyncio.ensure_future(first_message(ours, 30.0))
        await asyncio.sleep(0)  # let it start waiting on the socket
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        theirs.shutdown(socket.SHUT_WR)
        assert await first_message(ours, 5.0) == FirstMessage(b"", [], False)  # its end
        assert open_fds() == before


# What the tests above leave open (each test fails on a mutant of handover.py that
# bench/mutation.py found alive without it).
class CountedReads(socket.socket):
    """A socket that counts its recvmsg calls."""

    reads = 0

    def recvmsg(self, *args: int) -> tuple[bytes, list[tuple[int, int, bytes]], int, object]:
        self.reads += 1
        return super().recvmsg(*args)


async def test_the_first_message_is_awaited_on_readiness_also_under_a_second() -> None:
    ours, theirs = socket.socketpair()
    counted = CountedReads(fileno=ours.detach())
    with counted, theirs:
        counted.setblocking(False)
        waiting = asyncio.ensure_future(first_message(counted, 0.9))
        for _ in range(10):
            await asyncio.sleep(0)  # turns of the loop in which nothing arrives
        assert counted.reads == 1  # it waits to be readable, it does not spin
        theirs.sendall(b"GET")
        assert await waiting == FirstMessage(b"GET", [], False)
        assert counted.reads == 2


async def test_only_scm_rights_carry_fds() -> None:
    """Credentials (SO_PASSCRED makes the OS add them to every message) are not fds."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        theirs.sendall(HANDED)
        assert await first_message(ours, 5.0) == FirstMessage(HANDED, [], False)


def test_a_refused_hand_over_closes_its_fds_past_one_that_is_not_open() -> None:
    read_end, write_end = os.pipe()
    never_open = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # no fd reaches the hard limit
    try:
        with pytest.raises(ValueError, match="one fd, not 3"):
            handed_socket(FirstMessage(HANDED, [never_open, read_end, never_open], False))
        assert closed([read_end])
    finally:
        os.close(write_end)
