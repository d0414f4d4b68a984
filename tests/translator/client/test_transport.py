"""The plain HTTP pool against a real socket server: keep-alive, and a server that went away."""

from __future__ import annotations

import asyncio

import pytest

from loomgate.translator.client.transport import PlainHttpPool, TransportFailure, causes

REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"


async def test_a_gateway_that_went_away_is_refused_not_dropped() -> None:
    # A request on a stale keep-alive connection retries once, on a new connection: with the
    # server gone that one is refused, which tells the translator the request never arrived
    # (so it may start the gateway again and resend), however many idle connections were stale.
    connections: list[asyncio.StreamWriter] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        while await reader.readuntil(b"\r\n\r\n"):
            writer.write(REPLY)
            await writer.drain()
            if len(connections) == 1:
                await asyncio.sleep(0.05)  # the other request opens a second connection

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = PlainHttpPool(f"http://127.0.0.1:{port}/api/", {}, connect_timeout=5)
    try:
        both = [pool.request("GET", "info", params={}, body=None, read_timeout=5) for _ in "ab"]
        assert [r.status_code for r in await asyncio.gather(*both)] == [200, 200]
        assert len(connections) == 2  # two idle keep-alive connections now
        server.close()
        for writer in connections:
            writer.transport.abort()  # the server is gone: its connections reset
        await server.wait_closed()
        with pytest.raises(TransportFailure) as failed:
            await pool.request("GET", "info", params={}, body=None, read_timeout=5)
        assert failed.value.kind == "failed"
        assert any(isinstance(cause, ConnectionRefusedError) for cause in causes(failed.value))
    finally:
        await pool.aclose()
