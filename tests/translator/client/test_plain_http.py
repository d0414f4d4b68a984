"""The plain HTTP transport against a real socket server: keep-alive, a server that went away,
repeated headers, and bodies ended by the connection closing; how a body's end is read (a table).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from loomgate.translator.client.plain_http import PlainHttpPool, body_framing, read_head
from loomgate.translator.client.transport import TransportFailure, causes

REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"
Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Script], Awaitable[PlainHttpPool]]]:
    """Start a socket server running a script per connection; yield a maker of a pool to it."""
    servers: list[asyncio.Server] = []
    pools: list[PlainHttpPool] = []

    async def start(script: Script) -> PlainHttpPool:
        server = await asyncio.start_server(script, "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        pools.append(PlainHttpPool(f"http://127.0.0.1:{port}/api/", {}, connect_timeout=5))
        return pools[-1]

    yield start
    for pool in pools:
        await pool.aclose()
    for server in servers:
        server.close()
        await server.wait_closed()


async def test_a_gateway_that_went_away_is_refused_not_dropped() -> None:
    # A request on a stale keep-alive connection retries once, on a new connection: with the
    # server gone that one is refused, which tells the translator the request never arrived
    # (so it may start the gateway again and resend), however many idle connections were stale.
    connections: list[asyncio.StreamWriter] = []
    both_open = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        if len(connections) == 2:
            both_open.set()
        while await reader.readuntil(b"\r\n\r\n"):
            await both_open.wait()  # each request holds its connection until both are open
            writer.write(REPLY)
            await writer.drain()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = PlainHttpPool(f"http://127.0.0.1:{port}/api/", {}, connect_timeout=5)
    try:
        both = [pool.call("GET", "info", {}, None, 5) for _ in "ab"]
        assert [status for status, _ in await asyncio.gather(*both)] == [200, 200]
        assert len(connections) == 2  # two idle keep-alive connections now
        server.close()
        for writer in connections:
            writer.transport.abort()  # the server is gone: its connections reset
        await server.wait_closed()
        with pytest.raises(TransportFailure) as failed:
            await pool.call("GET", "info", {}, None, 5)
        assert failed.value.kind == "failed"
        assert any(isinstance(cause, ConnectionRefusedError) for cause in causes(failed.value))
    finally:
        await pool.aclose()


async def test_repeated_headers_are_read_as_one_list() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(
        b"HTTP/1.1 200 OK\r\nVary: Accept\r\nSet-Cookie: a=1, x\r\nVary: Cookie\r\n"
        b"Set-Cookie: b=2\r\nConnection: keep-alive\r\nconnection: close\r\n\r\n"
    )
    status, headers, cookies = await read_head(reader)
    assert status == 200
    assert headers["vary"] == "Accept, Cookie"
    assert headers["connection"] == "keep-alive, close"
    assert cookies == ["a=1, x", "b=2"]  # never combined: a cookie's value may hold a comma


async def test_a_repeated_connection_close_ends_the_connection(serve: Callable) -> None:
    connections = 0

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nConnection: close\r\n"
                b"Content-Length: 2\r\n\r\n{}"
            )

    pool = await serve(script)
    for _ in range(2):
        assert await pool.call("GET", "info", {}, None, 5) == (200, {})
    assert connections == 2  # the second header said close: the first connection was not kept


async def test_a_body_ended_by_closing_is_read_whole_and_its_connection_not_reused(
    serve: Callable,
) -> None:
    connections = 0

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"n": ')
        await writer.drain()
        writer.write(b"%d}" % connections)
        writer.close()

    pool = await serve(script)
    assert await pool.call("GET", "info", {}, None, 5) == (200, {"n": 1})
    assert await pool.call("GET", "info", {}, None, 5) == (200, {"n": 2})
    assert connections == 2


async def test_a_streamed_body_ended_by_closing_is_read_line_by_line(serve: Callable) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\n\r\ndata: 1\n\ndata: 2\n")
        writer.close()

    pool = await serve(script)
    async with pool.stream("events", {}, 5) as stream:
        assert stream.status == 200
        assert [line async for line in stream.lines()] == ["data: 1", "", "data: 2"]


@pytest.mark.parametrize(
    ("status", "headers", "framing"),
    [
        (200, {"content-length": "12"}, 12),
        (200, {"content-length": "12, 12"}, 12),  # the same length repeated
        (200, {"transfer-encoding": "chunked"}, "chunked"),
        (200, {"transfer-encoding": "gzip, chunked"}, "chunked"),
        (200, {"transfer-encoding": "chunked", "content-length": "5"}, "chunked"),
        (200, {"transfer-encoding": "gzip"}, "close"),  # not chunked last: read to the end
        (200, {}, "close"),
        (204, {}, 0),
        (304, {"content-length": "40"}, 0),
        (101, {}, 0),
    ],
)
def test_how_a_body_ends(status: int, headers: dict[str, str], framing: object) -> None:
    assert body_framing(status, headers) == framing


@pytest.mark.parametrize("length", ["12, 13", "-1", "twelve", ""])
def test_a_broken_content_length_drops_the_response(length: str) -> None:
    with pytest.raises(TransportFailure) as broken:
        body_framing(200, {"content-length": length})
    assert broken.value.kind == "dropped"
