"""The channel to a plain-http gateway: one websocket carrying its hot calls (submit a cell,
follow an execution), answered by id, so that each skips the per-request work a Jupyter Server
does for an HTTP request (0.45 ms a cell in a person's JupyterLab).

A minimal RFC 6455 client on asyncio streams: text frames, masked as a client must; pings
answered; no extensions. A gateway without the channel (an older loomgate) answers the upgrade
with 404, and the client keeps to HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
from typing import Any

from loomgate.shared import wire
from loomgate.translator.client.transport import (
    Connection,
    PlainHttpPool,
    PlainResponse,
    TransportFailure,
    deadline,
    read_head,
    within,
)

PATH = "channel"
ACCEPT_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_FRAME_BYTES = 1 << 30  # an answer larger than this ends the channel
TEXT, BINARY, CONTINUATION, CLOSE, PING, PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA


class ChannelAnswer(PlainResponse):
    """An answer that came over the channel: its status and its already decoded body."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status, b"")
        self._body = body

    def json(self) -> Any:
        """Return the body."""
        return self._body


def masked(payload: bytes, mask: bytes) -> bytes:
    """Return `payload` XORed with the 4-byte `mask` repeated (masking undoes itself)."""
    size = len(payload)
    key = (mask * (size // 4 + 1))[:size]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(key, "little")).to_bytes(
        size, "little"
    )


def client_frame(opcode: int, payload: bytes, mask: bytes | None = None) -> bytes:
    """Return one whole frame of `payload`, masked (with `mask`, else a random one)."""
    mask = mask if mask is not None else os.urandom(4)
    size = len(payload)
    if size < 126:
        head = bytes([0x80 | opcode, 0x80 | size])
    elif size < 1 << 16:
        head = bytes([0x80 | opcode, 0x80 | 126]) + size.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + size.to_bytes(8, "big")
    return head + mask + masked(payload, mask)


async def read_frame(reader: asyncio.StreamReader) -> tuple[bool, int, bytes]:
    """Return the next frame's (final, opcode, payload), unmasked."""
    first, second = await reader.readexactly(2)
    if first & 0x70:
        raise TransportFailure("the channel sent a frame with an extension bit set", "dropped")
    size = second & 0x7F
    if size == 126:
        size = int.from_bytes(await reader.readexactly(2), "big")
    elif size == 127:
        size = int.from_bytes(await reader.readexactly(8), "big")
    if size > MAX_FRAME_BYTES:
        raise TransportFailure(f"the channel sent a frame of {size} bytes", "dropped")
    if second & 0x80:
        mask = await reader.readexactly(4)
        return bool(first & 0x80), first & 0x0F, masked(await reader.readexactly(size), mask)
    return bool(first & 0x80), first & 0x0F, await reader.readexactly(size)


def accept_key(key: str) -> str:
    """Return the Sec-WebSocket-Accept a server must answer `key` with."""
    return base64.b64encode(hashlib.sha1((key + ACCEPT_GUID).encode()).digest()).decode()


class Channel:
    """One open channel: calls are sent at once, their answers matched by id as they come."""

    def __init__(self, connection: Connection) -> None:
        self._reader, self._writer = connection
        self._waiting: dict[int, asyncio.Future[ChannelAnswer]] = {}
        self._next_id = 0
        self.closed = False
        self._reading = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, pool: PlainHttpPool, connect_timeout: float) -> Channel | None:
        """Return a channel to the pool's gateway, or None if it has none (it answered the
        upgrade with anything but 101); TransportFailure if it cannot be reached."""
        reader, writer = await pool.connect()
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {pool.prefix}{PATH} HTTP/1.1\r\n{pool.request_head()}"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        try:
            writer.write(request.encode())
            status, headers, set_cookies = await within(read_head(reader), connect_timeout)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            writer.close()
            raise TransportFailure(f"the connection was closed: {e}", "dropped") from e
        except BaseException:
            writer.close()
            raise
        if set_cookies:
            pool.cookies.take(set_cookies)
        if status != 101 or headers.get("sec-websocket-accept") != accept_key(key):
            writer.close()
            return None
        return cls((reader, writer))

    async def call(self, message: dict[str, Any], read_timeout: float) -> ChannelAnswer:
        """Return the answer to one call; TransportFailure if the channel closes first (the
        call may have reached the gateway) or no answer comes within `read_timeout` s."""
        if self.closed:
            raise TransportFailure("the channel was closed", "dropped")
        self._next_id += 1
        call_id = self._next_id
        answer: asyncio.Future[ChannelAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = answer
        try:
            payload = json.dumps({"id": call_id, **message}).encode()
            self._writer.write(client_frame(TEXT, payload))
            async with deadline(read_timeout):
                return await answer
        except TimeoutError:
            raise TransportFailure(f"no answer within {read_timeout:g} s", "timeout") from None
        finally:
            self._waiting.pop(call_id, None)

    async def _read(self) -> None:
        """Deliver each answer to its call, answer pings; on the end, fail what still waits."""
        parts: list[bytes] = []
        ending: BaseException = TransportFailure("the gateway closed the channel", "dropped")
        try:
            while True:
                final, opcode, payload = await read_frame(self._reader)
                if opcode == PING:
                    self._writer.write(client_frame(PONG, payload))
                elif opcode == CLOSE:
                    break
                elif opcode in (TEXT, BINARY, CONTINUATION):
                    parts.append(payload)
                    if final:
                        self._deliver(b"".join(parts))
                        parts = []
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            ending = TransportFailure(f"the connection was closed: {e}", "dropped")
        except TransportFailure as e:
            ending = e
        finally:
            self.closed = True
            self._writer.close()
            for answer in self._waiting.values():
                if not answer.done():
                    answer.set_exception(ending)

    def _deliver(self, message: bytes) -> None:
        """Resolve the call the answer names (one no longer waited for is dropped)."""
        try:
            data: wire.ChannelAnswer = json.loads(message)
            call_id, status, body = data["id"], int(data["status"]), data["body"]
        except (ValueError, KeyError, TypeError) as e:
            raise TransportFailure(f"the channel sent a broken answer ({e})", "dropped") from e
        answer = self._waiting.get(call_id)
        if answer is not None and not answer.done():
            answer.set_result(ChannelAnswer(status, body))

    async def aclose(self) -> None:
        """Close the channel; calls still waiting fail as dropped."""
        self._writer.close()
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
