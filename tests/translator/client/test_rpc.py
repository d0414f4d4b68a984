"""The rpc websocket against scripted servers (websockets' own, or raw sockets where a server
must break the protocol): answers matched by id out of order, pings answered, CLOSE both ways,
a masked server frame and an oversized fragmented message refused, a gateway without an rpc
kept to HTTP, a socket closed mid-call reported as dropped and opened again, the token only in
the upgrade's Authorization header, and the rpc opened in the background by hot calls."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from loomgate.translator.client import rpc, session
from loomgate.translator.client.errors import AuthFailed, Timeout, Unreachable
from loomgate.translator.client.gateway import GatewayClient

EXECUTION = {"execution": {"number": 1, "state": "completed"}, "returned": "final"}
Handler = Callable[[ServerConnection], Awaitable[None]]
ProcessRequest = Callable[[ServerConnection, Request], Response | None]


@pytest.fixture
async def websocket_server() -> AsyncIterator[Callable[..., Awaitable[str]]]:
    """Start websockets servers running a handler per connection; yield a starter of its URL."""
    servers: list[Server] = []

    async def start(handler: Handler, process_request: ProcessRequest | None = None) -> str:
        server = await serve(handler, "127.0.0.1", 0, process_request=process_request)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[..., Awaitable[str]]]:
    """Start plain socket servers running a script per connection; yield a starter of its URL."""
    servers: list[asyncio.Server] = []

    async def start(
        script: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    ) -> str:
        server = await asyncio.start_server(script, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def opened(client: GatewayClient) -> bool:
    """Open the client's rpc as its hot calls do (in the background, a failure leaving HTTP in
    use) and return whether it is open."""
    await client._open_rpc_in_background()
    return client._rpc is not None and not client._rpc.closed


async def answer(websocket: ServerConnection, call: dict[str, Any], body: Any, status: int) -> None:
    """Send the answer to `call`."""
    await websocket.send(json.dumps({"id": call["id"], "status": status, "body": body}))


async def calls(websocket: ServerConnection, count: int) -> list[dict[str, Any]]:
    """Return the next `count` calls the client sent."""
    return [json.loads(await websocket.recv()) for _ in range(count)]


async def test_answers_are_matched_by_id_out_of_order_and_pings_answered(
    websocket_server: Callable[..., Awaitable[str]],
) -> None:
    seen: list[dict[str, Any]] = []
    paths: list[str] = []

    async def handler(websocket: ServerConnection) -> None:
        assert websocket.request is not None
        paths.append(websocket.request.path)
        await asyncio.wait_for(await websocket.ping(b"still there?"), 5)  # answered by a pong
        first, second = sorted(await calls(websocket, 2), key=lambda c: c["method"] != "POST")
        seen.extend([first, second])
        await answer(websocket, second, {**EXECUTION, "returned": "timeout"}, 200)
        await answer(websocket, first, EXECUTION, 201)
        await websocket.wait_closed()

    url = await websocket_server(handler)
    async with GatewayClient(url, "token") as client:
        assert await opened(client)
        submitted, followed = await asyncio.gather(
            client.submit("k", "1+1", wait=5), client.execution("k", 7, wait=5)
        )
    assert (submitted["returned"], followed["returned"]) == ("final", "timeout")
    assert paths == ["/api/loomgate/rpc"]
    post, get = seen
    assert (post["method"], post["path"]) == ("POST", "kernels/k/executions")
    assert post["body"]["code"] == "1+1" and post["body"]["wait"] == 5 and "query" not in post
    assert (get["method"], get["path"]) == ("GET", "kernels/k/executions/7")
    assert get["query"]["wait"] == "5" and "body" not in get  # a query travels as strings


async def test_aclose_closes_cleanly_and_the_token_stays_in_the_upgrade_header(
    websocket_server: Callable[..., Awaitable[str]], caplog: pytest.LogCaptureFixture
) -> None:
    closed: asyncio.Future[tuple[int | None, str | None]] = asyncio.Future()
    upgrade: list[Request] = []

    async def handler(websocket: ServerConnection) -> None:
        assert websocket.request is not None
        upgrade.append(websocket.request)
        await websocket.wait_closed()
        closed.set_result((websocket.close_code, websocket.close_reason))

    caplog.set_level(logging.DEBUG)
    url = await websocket_server(handler)
    async with GatewayClient(url, "s3cret-token") as client:
        assert await opened(client)
        assert client._rpc is not None
        sock = client._rpc._websocket.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    assert await asyncio.wait_for(closed, 5) == (1000, "")  # the client sent CLOSE
    (request,) = upgrade
    assert request.headers["Authorization"] == "token s3cret-token"
    assert "s3cret" not in request.path
    ours = [r.getMessage() for r in caplog.records if not r.name.startswith("websockets.server")]
    theirs = [r.getMessage() for r in caplog.records if r.name.startswith("websockets.server")]
    assert any("s3cret" in message for message in theirs)  # debug logs are captured here …
    assert not any("s3cret" in message for message in ours)  # … and the client's hold none


async def test_a_server_close_is_answered_and_the_pending_call_fails_as_dropped(
    websocket_server: Callable[..., Awaitable[str]],
) -> None:
    answered: asyncio.Future[bool] = asyncio.Future()

    async def handler(websocket: ServerConnection) -> None:
        await calls(websocket, 1)
        await websocket.close(1001, "going away")  # returns once the client answered
        answered.set_result(websocket.protocol.close_rcvd is not None)

    url = await websocket_server(handler)
    async with GatewayClient(url, "token") as client:
        assert await opened(client)
        with pytest.raises(Unreachable) as dropped:
            await client.submit("k", "1+1", wait=5)
    assert not dropped.value.refused  # it may have arrived: not resent blindly
    assert await asyncio.wait_for(answered, 5)


def accept(head: bytes) -> bytes:
    """Return the 101 answer to a websocket upgrade request's head."""
    key = next(
        line.split(b":", 1)[1].strip()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key:")
    )
    digest = hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
    return (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + base64.b64encode(digest) + b"\r\n\r\n"
    )


async def client_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Return the opcode and unmasked payload of the next frame the client sent."""
    first, second = await reader.readexactly(2)
    size = second & 0x7F
    if size >= 126:
        size = int.from_bytes(await reader.readexactly(2 if size == 126 else 8), "big")
    mask = await reader.readexactly(4)
    payload = await reader.readexactly(size)
    return first & 0x0F, bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))


async def test_a_masked_server_frame_is_refused(
    raw_server: Callable[..., Awaitable[str]],
) -> None:
    refusal: asyncio.Future[tuple[int, bytes]] = asyncio.Future()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(accept(await reader.readuntil(b"\r\n\r\n")))
        opcode, call = await client_frame(reader)
        assert opcode == 0x1
        payload = json.dumps({"id": json.loads(call)["id"], "status": 200, "body": {}}).encode()
        mask = b"\x01\x02\x03\x04"
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
        writer.write(bytes([0x81, 0x80 | len(payload)]) + mask + masked)
        refusal.set_result(await client_frame(reader))
        writer.close()  # as a server does once the client has sent CLOSE

    url = await raw_server(script)
    async with GatewayClient(url, "token") as client:
        assert await opened(client)
        with pytest.raises(Unreachable) as refused:
            await client.shutdown(keep_kernels=True)
    assert not refused.value.refused and "closed" in str(refused.value)
    opcode, payload = await asyncio.wait_for(refusal, 5)
    assert (opcode, int.from_bytes(payload[:2], "big")) == (0x8, 1002)  # CLOSE: protocol error


async def test_an_oversized_fragmented_message_is_refused(
    websocket_server: Callable[..., Awaitable[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rpc, "MAX_MESSAGE_BYTES", 1000)
    ended: asyncio.Future[int | None] = asyncio.Future()

    async def handler(websocket: ServerConnection) -> None:
        await calls(websocket, 1)
        await websocket.send(iter(["x" * 400] * 4))  # each fragment fits, the message does not
        await websocket.wait_closed()
        ended.set_result(websocket.close_code)

    url = await websocket_server(handler)
    async with GatewayClient(url, "token") as client:
        assert await opened(client)
        with pytest.raises(Unreachable):
            await client.submit("k", "1+1", wait=5)
    assert await asyncio.wait_for(ended, 5) == 1009  # "message too big"


async def test_a_gateway_without_an_rpc_is_kept_to_http(
    raw_server: Callable[..., Awaitable[str]],
) -> None:
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

    url = await raw_server(script)
    async with GatewayClient(url, "token") as client:
        assert not await opened(client)
        for _ in range(session.HOT_CALLS_BEFORE_RPC):  # enough to open an rpc: not asked again
            assert (await client.submit("k", "1+1", wait=5))["returned"] == "final"
        assert client._rpc_opening is None
    assert requests == [
        "GET /api/loomgate/rpc HTTP/1.1",
        *["POST /api/loomgate/kernels/k/executions HTTP/1.1"] * session.HOT_CALLS_BEFORE_RPC,
    ]


async def test_a_refused_upgrade_leaves_the_call_to_http_with_its_cookie(
    raw_server: Callable[..., Awaitable[str]],
) -> None:
    heads: list[str] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append((await reader.readuntil(b"\r\n\r\n")).decode())
        writer.write(b"HTTP/1.1 403 Forbidden\r\nSet-Cookie: login=abc; Path=/\r\n")
        writer.write(b"Content-Length: 0\r\n\r\n")
        await reader.read()

    url = await raw_server(script)
    async with GatewayClient(url, "secret") as client:
        with pytest.raises(AuthFailed):
            await client.submit("k", "1+1", wait=1)  # HTTP: its cookie is kept
        assert not await opened(client)  # the upgrade carries the token and the cookie
    post_head, upgrade_head = heads
    assert post_head.startswith("POST ")
    assert "Upgrade: websocket" not in post_head
    assert "authorization: token secret" in upgrade_head.lower()
    assert "cookie: login=abc" in upgrade_head.lower()


async def test_an_rpc_that_closes_mid_call_is_dropped_then_opened_again(
    websocket_server: Callable[..., Awaitable[str]],
) -> None:
    connections = 0

    async def handler(websocket: ServerConnection) -> None:
        nonlocal connections
        connections += 1
        (call,) = await calls(websocket, 1)
        if connections == 1:
            websocket.transport.abort()  # the gateway went away with the call unanswered
            return
        await answer(websocket, call, EXECUTION, 201)
        await websocket.wait_closed()

    url = await websocket_server(handler)
    async with GatewayClient(url, "token") as client:
        assert await opened(client)
        with pytest.raises(Unreachable) as dropped:
            await client.submit("k", "1+1", wait=5)
        assert not dropped.value.refused  # it may have arrived: not resent blindly
        assert (await client.submit("k", "1+1", wait=5))["returned"] == "final"
    assert connections == 2


async def test_hot_calls_open_the_rpc_in_the_background(
    websocket_server: Callable[..., Awaitable[str]],
) -> None:
    over_http: list[str] = []
    over_rpc: list[str] = []

    def process_request(connection: ServerConnection, request: Request) -> Response | None:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return None
        over_http.append(request.path)
        response = connection.respond(200, json.dumps(EXECUTION))
        response.headers = Headers({**response.headers, "Connection": "close"})
        return response

    async def handler(websocket: ServerConnection) -> None:
        async for message in websocket:
            call = json.loads(message)
            over_rpc.append(call["path"])
            await answer(websocket, call, EXECUTION, 200)

    url = await websocket_server(handler, process_request)
    async with GatewayClient(url, "token") as client:
        for _ in range(session.HOT_CALLS_BEFORE_RPC):
            await client.execution("k", 1)  # over HTTP; the last one starts opening the rpc
        assert client._rpc_opening is not None
        await client._rpc_opening
        await client.execution("k", 2)
        await client.rich("k", 2, 0)  # every call of an rpc method goes over it once open
    first = "/api/loomgate/kernels/k/executions/1?wait=0&head=0&tail=0"
    assert over_http == [first] * session.HOT_CALLS_BEFORE_RPC
    assert over_rpc == ["kernels/k/executions/2", "kernels/k/executions/2/rich/0"]


async def test_a_call_without_an_answer_is_a_timeout_and_the_rpc_stays_open(
    websocket_server: Callable[..., Awaitable[str]],
) -> None:
    async def handler(websocket: ServerConnection) -> None:
        _unanswered, answered = await calls(websocket, 2)
        await answer(websocket, answered, {"service": "loomgate"}, 200)
        await websocket.wait_closed()

    url = await websocket_server(handler)
    async with GatewayClient(url, "token") as client:
        assert await opened(client)
        with pytest.raises(Timeout) as slow:
            await client.request("GET", "kernels", read_timeout=0.2)
        assert "did not answer within 0.2 s" in str(slow.value)
        assert (await client.request("GET", "info"))["service"] == "loomgate"


async def test_after_the_gateway_is_gone_the_next_call_is_refused_so_it_may_be_resent() -> None:
    async def handler(websocket: ServerConnection) -> None:
        await websocket.wait_closed()

    server = await serve(handler, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with GatewayClient(url, "token") as client:
        assert await opened(client)
        assert client._rpc is not None
        server.close()  # stops listening and closes the rpc: the gateway went away
        await server.wait_closed()
        await asyncio.wait_for(client._rpc._reading, 5)
        with pytest.raises(Unreachable) as gone:
            await client.submit("k", "1+1", wait=5)
    assert gone.value.refused  # the rpc opens again first, and that connection is refused
    assert "connection refused" in str(gone.value)
