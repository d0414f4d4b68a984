"""The stdio transport on the event loop: the host's pipes read and written without threads.

The SDK's stdio transport reads each line and writes each reply through a worker thread; on a
busy two-core machine those hand-offs cost more than the rest of a trivial tool call. When
stdin and stdout are pipes or sockets (how MCP hosts launch servers) this module gives the SDK
line streams on asyncio pipe transports instead; anything else (a file, a terminal) keeps the
SDK's own transport. Either way fd 0 reads /dev/null and fd 1 goes to stderr while serving, so
nothing else in the process can read the host's requests or write into its replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

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
    """The lines of a readable pipe, as the SDK's stdio transport iterates them."""

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


class PipeWriter(asyncio.Protocol):
    """A writable pipe with the SDK transport's write/flush; flush waits until the OS has it."""

    def __init__(self) -> None:
        self._transport: asyncio.WriteTransport | None = None
        self._drained = asyncio.Event()
        self._drained.set()
        self._lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.WriteTransport, transport)
        self._transport.set_write_buffer_limits(high=0)  # any backlog pauses: flush means sent

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or BrokenPipeError("the host closed the stdout pipe")
        self._drained.set()

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
        """Close the pipe once what is queued has been written."""
        if self._transport is not None:
            self._transport.close()


@contextlib.asynccontextmanager
async def pipe_streams(wire_in: int, wire_out: int) -> AsyncIterator[tuple[PipeLines, PipeWriter]]:
    """Yield line reader and writer on the two wire fds, closed afterwards."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
    )
    _, writer = await loop.connect_write_pipe(PipeWriter, os.fdopen(wire_out, "wb", buffering=0))
    try:
        yield PipeLines(reader), writer
    finally:
        read_transport.close()
        writer.close()


async def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve `server` on the host's stdin/stdout until the host closes stdin."""
    if not (pipe_like(0) and pipe_like(1)):
        await server.run_stdio_async()
        return
    # The SDK runs an MCPServer on given streams only through its low-level server (its
    # in-memory client does the same; making that public is an open TODO in the SDK).
    lowlevel = server._lowlevel_server
    with claimed_stdio() as (wire_in, wire_out):
        async with (
            pipe_streams(os.dup(wire_in), os.dup(wire_out)) as (lines, writer),
            stdio_server(stdin=cast(Any, lines), stdout=cast(Any, writer)) as (read, write),
        ):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
