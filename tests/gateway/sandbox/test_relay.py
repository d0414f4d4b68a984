"""Two sockets relayed both ways (sandbox/network/relay.py), spliced and copied: each end passed on
as a half-close, an error as a reset of both, a filter on what comes back, a cancelled relay leaving
no socket; a socket whose open file another holder made blocking, or whose linger it armed, never
makes the loop wait; on TCP pairs over 127.0.0.1 in this process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator

import pytest

from loomgate.gateway.sandbox.network import relay

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
WAIT = 10.0  # seconds: a bound on what must happen at once, never a sleep


@pytest.fixture(params=[True, False], ids=["spliced", "copied"])
def spliced(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if not request.param:
        monkeypatch.setattr(relay, "SPLICE", None)
    return bool(request.param)


@pytest.fixture
async def listener() -> AsyncIterator[socket.socket]:
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


async def pair(listener: socket.socket) -> tuple[Streams, socket.socket]:
    """Return a connection over 127.0.0.1: streams at one end, the raw socket at the other."""
    streams = await asyncio.open_connection(*listener.getsockname())
    raw, _ = await asyncio.get_running_loop().sock_accept(listener)
    raw.setblocking(False)
    return streams, raw


class Upper:
    """A head filter that upper-cases the first 5 bytes back, then lets the rest pass."""

    def __init__(self) -> None:
        self.seen = b""
        self.done = False
        self.sent_any = False

    def feed(self, data: bytes) -> bytes:
        self.seen += data
        if b"!" in self.seen:
            raise ValueError("not what was expected")
        if len(self.seen) < 5:
            return b""
        self.done = self.sent_any = True
        return self.seen[:5].upper() + self.seen[5:]

    def cut_short(self) -> bytes:
        return b"cut short"


async def test_both_directions_and_each_end(listener: socket.socket, spliced: bool) -> None:
    (client_r, client_w), near = await pair(listener)
    (origin_r, origin_w), far = await pair(listener)
    task = asyncio.ensure_future(relay.relay(near, far, b"early:", None))
    upload, download = os.urandom(3 << 20), os.urandom(5 << 20)
    client_w.write(upload)
    client_w.write_eof()  # the client is done sending; the answer still flows back
    assert await origin_r.read() == b"early:" + upload
    origin_w.write(download)
    origin_w.write_eof()
    assert await client_r.read() == download
    await task
    assert near.fileno() == -1 and far.fileno() == -1
    for writer in (client_w, origin_w):
        writer.close()
        await writer.wait_closed()


async def test_a_reset_resets_the_other_side(listener: socket.socket, spliced: bool) -> None:
    (client_r, client_w), near = await pair(listener)
    (_, origin_w), far = await pair(listener)
    task = asyncio.ensure_future(relay.relay(near, far, b"", None))
    origin = origin_w.get_extra_info("socket")
    origin.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    origin_w.transport.abort()  # the origin resets the connection (no orderly end)
    with pytest.raises(ConnectionResetError):
        await client_r.read()
    await task
    client_w.close()


async def test_a_filter_rewrites_the_start_of_the_answer(listener: socket.socket) -> None:
    for origin_says, client_gets in (
        ([b"he", b"llo world"], b"HELLO world"),
        ([b"hel"], b"cut short"),  # ends before the filter let anything through
        ([b"he!"], None),  # the filter refuses: the client's connection is reset
    ):
        (client_r, client_w), near = await pair(listener)
        (_, origin_w), far = await pair(listener)
        task = asyncio.ensure_future(relay.relay(near, far, b"", Upper()))
        for part in origin_says:
            origin_w.write(part)
            await origin_w.drain()
        origin_w.write_eof()
        if client_gets is None:
            with pytest.raises(ConnectionResetError):
                await client_r.read()
        else:
            assert await client_r.read() == client_gets
        client_w.write_eof()  # the client's direction ends too: the relay is done
        await task
        for writer in (client_w, origin_w):
            writer.close()


async def test_a_cancelled_relay_closes_both_sockets(
    listener: socket.socket, spliced: bool
) -> None:
    (client_r, client_w), near = await pair(listener)
    (origin_r, origin_w), far = await pair(listener)
    task = asyncio.ensure_future(relay.relay(near, far, b"", None))
    client_w.write(b"ping")
    assert await origin_r.readexactly(4) == b"ping"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert near.fileno() == -1 and far.fileno() == -1
    for reader in (client_r, origin_r):
        with pytest.raises(ConnectionResetError):
            await reader.read()
    for writer in (client_w, origin_w):
        writer.close()


def raw_pair(listener: socket.socket) -> tuple[socket.socket, socket.socket]:
    """Return a connection over 127.0.0.1: a blocking end for a thread, and the accepted end,
    non-blocking, for the relay."""
    peer = socket.create_connection(listener.getsockname())
    ours, _ = listener.accept()
    ours.setblocking(False)
    return peer, ours


def drained(sock: socket.socket) -> int:
    """Read `sock` to its end; return how many bytes came."""
    count = 0
    while data := sock.recv(1 << 20):
        count += len(data)
    return count


async def test_a_socket_another_holder_made_blocking_never_blocks_the_loop(
    listener: socket.socket,
) -> None:
    """A sandbox that handed a socket over may keep a copy and clear O_NONBLOCK on the open file
    both share: the relay (copying, as for a handed socket) still never waits in a call."""
    client, near = raw_pair(listener)
    origin, far = raw_pair(listener)
    task = asyncio.ensure_future(relay.relay(near, far, b"", None, splice=False))
    kept = os.dup(near.fileno())
    os.set_blocking(kept, True)  # before the relay's first call: the client sends nothing
    got: list[int] = []

    def send_then_end() -> None:
        origin.sendall(b"x" * (32 << 20))  # more than the buffers on the way hold
        origin.shutdown(socket.SHUT_WR)
        drained(origin)

    def end() -> None:  # the client ends and reads it all: a blocked loop is freed too
        client.shutdown(socket.SHUT_WR)
        got.append(drained(client))

    sender = threading.Thread(target=send_then_end)
    watchdog = threading.Timer(WAIT, end)
    sender.start()
    watchdog.start()
    try:
        began = time.monotonic()
        with pytest.raises(TimeoutError):  # the relay waits, on the client, without a block
            await asyncio.wait_for(asyncio.shield(task), 1.0)
        assert time.monotonic() - began < WAIT / 2
    finally:
        watchdog.cancel()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, watchdog.join)  # it ran end() whole, or never will
        if not got:
            await loop.run_in_executor(None, end)
        await task
        await loop.run_in_executor(None, sender.join)
        for sock in (client, origin):
            sock.close()
        os.close(kept)
    assert got == [32 << 20]


def test_close_never_waits_for_a_linger_someone_armed(listener: socket.socket) -> None:
    client, near = raw_pair(listener)
    with client:
        near.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 5))
        sent = 0
        with contextlib.suppress(BlockingIOError):  # bytes the client has not read yet
            while True:
                sent += near.send(b"x" * 65536)
        began = time.monotonic()
        relay.close_socket(near)
        assert time.monotonic() - began < 1.0
        assert drained(client) == sent  # an end, not a reset: every byte still arrives
