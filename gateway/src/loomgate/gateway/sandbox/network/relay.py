"""Two connected sockets relayed both ways in the event loop, for the kernel's proxy: each
direction's end passed on as a half-close, an error as the end of both (a reset for a TCP
peer), and an optional filter on the start of what comes back (the HTTP proxy's response head);
and the proxy's own reads, writes and closes of a client socket.

Every read and write says MSG_DONTWAIT and every close sets SO_LINGER first: a client socket a
sandbox handed over (`handover.py`) shares its open file with whoever in the sandbox kept a
copy, who can clear O_NONBLOCK or arm a linger, and neither may make the gateway's loop wait
(one that re-arms a linger between the two calls of a close and closes its own copy in that
window still makes that close wait: a race it must win each time). os.splice cannot say so per
call (the socket's side blocks as its O_NONBLOCK says), so it moves bytes only between the
gateway's own sockets (a unix or loopback client it accepted, and an upstream); a handed
socket's bytes are copied, through 64 KiB, then 1 MiB once a read fills that. Measured side by
side on 2 shared CPUs (bench/proxy_bench.py, 200 MB from a loopback server, × direct): a
handed socket copied 0.55-0.66, spliced 0.43-0.60, the earlier bridge that relayed too
0.42-0.49; two bare threads relaying outside asyncio reach 0.5-0.65 there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from typing import Protocol

__all__ = ["HeadFilter", "close_socket", "ready", "received", "relay", "sent"]

CHUNK = 1 << 20
FIRST_CHUNK = 1 << 16
FAIR = 16 * CHUNK  # bytes a direction moves before it lets the loop run others
SPLICE = getattr(os, "splice", None)
NONBLOCK = getattr(os, "SPLICE_F_NONBLOCK", 0) | getattr(os, "SPLICE_F_MOVE", 0)
F_SETPIPE_SZ = 1031
DONTWAIT = socket.MSG_DONTWAIT
NO_LINGER = struct.pack("ii", 0, 0)
RESET = struct.pack("ii", 1, 0)  # close with a reset at once


class HeadFilter(Protocol):
    """Rewrites the start of what the upstream sends; the rest passes once `done`."""

    done: bool
    sent_any: bool

    def feed(self, data: bytes) -> bytes:
        """Return what to send on for `data` (ValueError: the upstream spoke nonsense)."""
        ...

    def cut_short(self) -> bytes:
        """Return what to send on when the upstream ends before anything was sent on."""
        ...


async def relay(
    client: socket.socket,
    upstream: socket.socket,
    early: bytes,
    head: HeadFilter | None,
    *,
    splice: bool = True,
) -> None:
    """Relay both ways until both directions end, then close both sockets (they are this
    function's from its call). `early`: what the client sent after its request, for upstream;
    `splice`: False for a client the gateway did not make (copied then, never spliced).
    When a direction fails (or the relay is cancelled) the other is ended too, and a TCP peer
    gets a reset rather than an end that would look like a complete answer."""
    pumps = [
        asyncio.ensure_future(pump(client, upstream, early, None, splice)),
        asyncio.ensure_future(pump(upstream, client, b"", head, splice)),
    ]
    failed = True
    try:
        await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
        failed = any(p.done() and not p.cancelled() and p.exception() for p in pumps)
    finally:
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        for sock in (client, upstream):
            close_socket(sock, reset=failed)
    for task in pumps:
        error = None if task.cancelled() else task.exception()
        if error is not None and not isinstance(error, OSError):
            raise error


async def pump(
    source: socket.socket, sink: socket.socket, early: bytes, head: HeadFilter | None, splice: bool
) -> None:
    """Send `early`, then what `source` sends (through `head` first), then end `sink`'s
    sending side."""
    if early:
        await sent(sink, early)
    if head is not None and not await filtered(source, sink, head):
        return
    if not splice or SPLICE is None or not await spliced(source, sink):
        await copied(source, sink)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


async def filtered(source: socket.socket, sink: socket.socket, head: HeadFilter) -> bool:
    """Pass what `source` sends through `head` until it is done; False when `source` ended
    first (what was owed was sent)."""
    while not head.done:
        data = await received(source, 65536)
        if not data:
            await sent(sink, b"" if head.sent_any else head.cut_short())
            sink.shutdown(socket.SHUT_WR)
            return False
        try:
            out = head.feed(data)
        except ValueError as error:
            raise ConnectionAbortedError(str(error)) from None
        if out:
            await sent(sink, out)
    return True


async def spliced(source: socket.socket, sink: socket.socket) -> bool:
    """Move bytes with os.splice until `source` ends; False if these sockets cannot be
    spliced (nothing moved then)."""
    assert SPLICE is not None
    read_end, write_end = os.pipe()
    try:
        with contextlib.suppress(OSError):
            import fcntl

            fcntl.fcntl(write_end, F_SETPIPE_SZ, CHUNK)
        moved = False
        since = 0  # bytes moved since the loop last ran others
        while True:
            try:
                count = SPLICE(source.fileno(), write_end, CHUNK, flags=NONBLOCK)
            except BlockingIOError:
                await ready(source, writing=False)
                since = 0
                continue
            except OSError as error:
                if error.errno == 22 and not moved:  # EINVAL: not spliceable here
                    return False
                raise
            if count == 0:
                return True
            moved = True
            since += count
            while count:
                try:
                    count -= SPLICE(read_end, sink.fileno(), count, flags=NONBLOCK)
                except BlockingIOError:
                    await ready(sink, writing=True)
            if since >= FAIR:
                await asyncio.sleep(0)
                since = 0
    finally:
        os.close(read_end)
        os.close(write_end)


async def copied(source: socket.socket, sink: socket.socket) -> None:
    """Copy through a buffer until `source` ends: a small one, grown to CHUNK once a read
    fills it (most connections are short, and a large buffer made for each costs them)."""
    buffer = bytearray(FIRST_CHUNK)
    since = 0  # bytes moved since the loop last ran others
    while True:
        try:
            count = source.recv_into(buffer, len(buffer), DONTWAIT)
        except BlockingIOError:
            await ready(source, writing=False)
            since = 0
            continue
        if count == 0:
            return
        await sent(sink, memoryview(buffer)[:count])
        if count == len(buffer) < CHUNK:
            buffer = bytearray(CHUNK)
        since += count
        if since >= FAIR:
            await asyncio.sleep(0)
            since = 0


async def received(sock: socket.socket, size: int) -> bytes:
    """Return up to `size` bytes from `sock` once some came (b"": its end)."""
    while True:
        try:
            return sock.recv(size, DONTWAIT)
        except BlockingIOError:
            await ready(sock, writing=False)


async def sent(sock: socket.socket, data: bytes | memoryview) -> None:
    """Send all of `data` on `sock`."""
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view, DONTWAIT) :]
        except BlockingIOError:
            await ready(sock, writing=True)


def close_socket(sock: socket.socket, *, reset: bool = False) -> None:
    """Close `sock`; a TCP one with a reset when `reset` (its peer must not take the end for a
    complete answer), else with no linger (close never waits for unsent bytes)."""
    if sock.family != socket.AF_UNIX:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET if reset else NO_LINGER)
    sock.close()


async def ready(sock: socket.socket, *, writing: bool) -> None:
    """Return once `sock` can be read (or written)."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    fd = sock.fileno()
    add, remove = (
        (loop.add_writer, loop.remove_writer) if writing else (loop.add_reader, loop.remove_reader)
    )

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    add(fd, wake)
    try:
        await waiter
    finally:
        remove(fd)
