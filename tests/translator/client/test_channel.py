"""The translator's channel client: its frames (a table), and against a scripted socket server:
answers matched by id, pings answered, a gateway without a channel kept to HTTP, a channel that
closes mid-call reported as dropped and opened again for the next call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from loomgate.translator.client.channel import (
    PING,
    PONG,
    TEXT,
    accept_key,
    client_frame,
    masked,
    read_frame,
)
from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.gateway import GatewayClient


def test_the_rfc_example_key_is_accepted() -> None:
    # RFC 6455 §1.3's worked example.
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@pytest.mark.parametrize("size", [0, 1, 5, 125, 126, 127, 65535, 65536, 300_000])
async def test_frames_of_every_length_form_read_back(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    frame = client_frame(TEXT, payload, mask=b"\x01\x02\x03\x04")
    assert frame[1] & 0x80  # a client's frames are masked
    assert payload not in frame or size < 4  # … so the payload is not sent as it is
    reader = asyncio.StreamReader()
    reader.feed_data(frame)
    assert await read_frame(reader) == (True, TEXT, payload)


@pytest.mark.parametrize(
    ("payload", "mask"),
    [(b"", b"abcd"), (b"x", b"\x00\x00\x00\x00"), (b"hello world", b"\xff\x10\x20\x30")],
)
def test_masking_undoes_itself(payload: bytes, mask: bytes) -> None:
    assert masked(masked(payload, mask), mask) == payload


def server_frame(opcode: int, payload: bytes) -> bytes:
    """Return an unmasked frame as a server sends it."""
    size = len(payload)
    if size < 126:
        return bytes([0x80 | opcode, size]) + payload
    return bytes([0x80 | opcode, 126]) + size.to_bytes(2, "big") + payload


Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
Starter = Callable[[Script], Awaitable[str]]


@pytest.fixture
async def scripted() -> AsyncIterator[Starter]:
    """Start a socket server that runs a script per connection; yield a starter of its URL."""
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> str:
        server = await asyncio.start_server(script, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def upgrade(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
    """Answer a websocket upgrade; return the path it asked for."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    key = next(
        line.split(":", 1)[1].strip()
        for line in head.split("\r\n")
        if line.lower().startswith("sec-websocket-key:")
    )
    writer.write(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + f"Sec-WebSocket-Accept: {accept_key(key)}\r\n\r\n".encode()
    )
    return head.split(" ")[1]


async def next_call(reader: asyncio.StreamReader) -> dict:
    """Return the next call the client sent."""
    _, opcode, payload = await read_frame(reader)
    assert opcode == TEXT
    return json.loads(payload)  # type: ignore[no-any-return]


def answer(call_id: int, body: dict, status: int = 200) -> bytes:
    """Return the frame answering call `call_id`."""
    return server_frame(TEXT, json.dumps({"id": call_id, "status": status, "body": body}).encode())


EXECUTION = {"execution": {"number": 1, "state": "completed"}, "returned": "final"}


async def test_answers_are_matched_by_id_and_pings_answered(scripted: Starter) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert await upgrade(reader, writer) == "/api/loomgate/channel"
        writer.write(server_frame(PING, b"still there?"))
        calls, pongs = [], []
        while len(calls) < 2 or not pongs:  # the calls may come before the pong
            _, opcode, payload = await read_frame(reader)
            (pongs if opcode == PONG else calls).append(payload)
        assert pongs == [b"still there?"]
        first, second = sorted(
            (json.loads(call) for call in calls), key=lambda c: c["call"] != "submit"
        )
        assert (first["call"], second["call"]) == ("submit", "follow")
        assert first["args"]["code"] == "1+1" and second["execution"] == "7"
        writer.write(answer(second["id"], {**EXECUTION, "returned": "timeout"}))
        writer.write(answer(first["id"], EXECUTION, 201))
        await reader.read()  # until the client closes

    url = await scripted(script)
    async with GatewayClient(url, "token") as client:
        submitted, followed = await asyncio.gather(
            client.submit("k", "1+1", wait=5), client.execution("k", 7, wait=5)
        )
    assert (submitted["returned"], followed["returned"]) == ("final", "timeout")


async def test_a_gateway_without_a_channel_is_kept_to_http(scripted: Starter) -> None:
    requests: list[str] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
            except asyncio.IncompleteReadError:
                return  # the client closed this connection (the refused upgrade's)
            requests.append(head.split("\r\n")[0])
            length = next(
                (int(line.split(":")[1]) for line in head.split("\r\n")
                 if line.lower().startswith("content-length:")), 0,
            )  # fmt: skip
            await reader.readexactly(length)
            if "Upgrade: websocket" in head:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            body = json.dumps(EXECUTION).encode()
            writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    url = await scripted(script)
    async with GatewayClient(url, "token") as client:
        for _ in range(2):
            assert (await client.submit("k", "1+1", wait=5))["returned"] == "final"
    assert requests == [
        "GET /api/loomgate/channel HTTP/1.1",
        "POST /api/loomgate/kernels/k/executions HTTP/1.1",
        "POST /api/loomgate/kernels/k/executions HTTP/1.1",
    ]


async def test_a_channel_that_closes_mid_call_is_dropped_then_opened_again(
    scripted: Starter,
) -> None:
    connections = 0

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await upgrade(reader, writer)
        call = await next_call(reader)
        if connections == 1:
            writer.close()  # the gateway went away with the call unanswered
            return
        writer.write(answer(call["id"], EXECUTION, 201))
        await reader.read()

    url = await scripted(script)
    async with GatewayClient(url, "token") as client:
        with pytest.raises(GatewayError) as dropped:
            await client.submit("k", "1+1", wait=5)
        assert dropped.value.code == "unreachable" and "closed" in str(dropped.value)
        assert not dropped.value.details["refused"]  # it may have arrived: not resent blindly
        assert (await client.submit("k", "1+1", wait=5))["returned"] == "final"
    assert connections == 2


async def test_a_refused_upgrade_leaves_the_call_to_http_with_its_cookie(scripted: Starter) -> None:
    heads: list[str] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append((await reader.readuntil(b"\r\n\r\n")).decode())
        writer.write(b"HTTP/1.1 403 Forbidden\r\nSet-Cookie: login=abc; Path=/\r\n")
        writer.write(b"Content-Length: 0\r\n\r\n")
        await reader.read()

    url = await scripted(script)
    async with GatewayClient(url, "secret") as client:
        with pytest.raises(GatewayError) as refused:
            await client.submit("k", "1+1", wait=1)
    assert refused.value.code == "auth"  # HTTP's answer, reported as HTTP reports it
    upgrade_head, post_head = heads
    assert "Upgrade: websocket" in upgrade_head and "Authorization: token secret" in upgrade_head
    assert post_head.startswith("POST ") and "Cookie: login=abc\r\n" in post_head
