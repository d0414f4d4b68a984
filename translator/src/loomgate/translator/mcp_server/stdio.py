"""The stdio transport on the event loop: the host's pipes read and written without threads.

The SDK's stdio transport reads each line and writes each reply through a worker thread; on a
busy two-core machine those hand-offs cost more than the rest of a trivial tool call. When
stdin and stdout are pipes or sockets (how MCP hosts launch servers: Node's libuv gives a
socketpair per stream) this module gives the SDK line streams on asyncio transports instead;
anything else (a file, a terminal) keeps the SDK's own transport. Either way fd 0 reads
/dev/null and fd 1 goes to stderr while serving, so nothing else in the process can read the
host's requests or write into its replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import socket
import stat
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

from loomgate.translator.mcp_server.sdk_internals import lowlevel_server

# A line longer than this (a request of over 256 MiB) ends the session instead of the memory.
MAX_LINE_BYTES = 256 << 20


def pipe_like(fd: int) -> bool:
    """Return whether `fd` is a pipe or a socket, which the event loop can watch."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.contextmanager
def claimed_stdio() -> Iterator[tuple[int, int]]:
    """Yield private duplicates of fds 0 and 1, with 0 on /dev/null and 1 on stderr meanwhile."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        os.close(devnull)
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


class PipeLines:
    """The lines of the wire's read side, as the SDK's stdio transport iterates them."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        """Return the next line; StopAsyncIteration at end of input."""
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class Wire(asyncio.Protocol):
    """One transport of the wire: feeds `reader` (if any) and gives the SDK write and flush.

    flush returns once the OS has everything written, so a full pipe holds the replies back.
    """

    def __init__(self, reader: asyncio.StreamReader | None = None) -> None:
        self._reader = reader
        self._transport: asyncio.WriteTransport | None = None
        self._drained = asyncio.Event()
        self._drained.set()
        self._lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._reader is not None:
            self._reader.set_transport(transport)
        if isinstance(transport, asyncio.WriteTransport):
            self._transport = transport
            transport.set_write_buffer_limits(high=0)  # any backlog pauses: flush means sent

    def data_received(self, data: bytes) -> None:
        if self._reader is not None:
            self._reader.feed_data(data)

    def eof_received(self) -> bool:
        if self._reader is not None:
            self._reader.feed_eof()
        return True  # a socket stays open for the replies still to come

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or BrokenPipeError("the host closed the wire")
        self._drained.set()
        if self._reader is not None:
            self._reader.feed_eof()

    def pause_writing(self) -> None:
        self._drained.clear()

    def resume_writing(self) -> None:
        self._drained.set()

    async def write(self, text: str) -> None:
        """Queue `text` (the OS takes it at once unless the pipe is full)."""
        if self._lost is not None or self._transport is None:
            raise anyio.BrokenResourceError from self._lost
        self._transport.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Return once everything written is in the pipe."""
        await self._drained.wait()
        if self._lost is not None:
            raise anyio.BrokenResourceError from self._lost

    def close(self) -> None:
        """Close the transport once what is queued has been written."""
        if self._transport is not None:
            self._transport.close()


def hung_up(error: BaseException) -> bool:
    """Return whether `error` (or every error it groups) is a terminal's hang-up (EIO).

    A terminal that closes makes reads fail with EIO: the host has gone, as at end of input.
    """
    grouped = getattr(error, "exceptions", None)
    if grouped:
        return all(hung_up(inner) for inner in grouped)
    return isinstance(error, OSError) and error.errno == errno.EIO


def same_file(fd: int, other: int) -> bool:
    """Return whether two fds are one file (one socket serving as both stdin and stdout)."""
    a, b = os.fstat(fd), os.fstat(other)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


@contextlib.asynccontextmanager
async def wire_streams(wire_in: int, wire_out: int) -> AsyncIterator[tuple[PipeLines, Wire]]:
    """Yield the line reader and the writer on the wire fds (both closed afterwards)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    if same_file(wire_in, wire_out):
        # One socket both ways: a pipe transport would take incoming requests for a hang-up.
        os.close(wire_out)
        _, writer = await loop.create_connection(
            lambda: Wire(reader), sock=socket.socket(fileno=wire_in)
        )
        transports: list[asyncio.BaseTransport] = []
    else:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: Wire(reader), os.fdopen(wire_in, "rb", buffering=0)
        )
        _, writer = await loop.connect_write_pipe(Wire, os.fdopen(wire_out, "wb", buffering=0))
        transports = [read_transport]
    try:
        yield PipeLines(reader), writer
    finally:
        for transport in transports:
            transport.close()
        writer.close()


async def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve `server` on the host's stdin/stdout until the host closes stdin."""
    if not (pipe_like(0) and pipe_like(1)):
        try:
            await server.run_stdio_async()
        except Exception as e:  # the SDK's task group wraps its reader thread's error
            if not hung_up(e):
                raise
        return
    lowlevel = lowlevel_server(server)
    with claimed_stdio() as (wire_in, wire_out):
        async with (
            wire_streams(os.dup(wire_in), os.dup(wire_out)) as (lines, writer),
            # The SDK types both as anyio.AsyncFile; it iterates lines and calls write and flush.
            stdio_server(stdin=cast(Any, lines), stdout=cast(Any, writer)) as (read, write),
        ):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
