"""A minimal standard Jupyter websocket client, in both wire protocols, for tests and benches."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timezone
from typing import Any

import websockets

V1 = "v1.kernel.websocket.jupyter.org"


def encode_v1(channel: str, msg: dict[str, Any]) -> bytes:
    """Return `msg` framed in the v1 binary protocol."""
    parts = [
        json.dumps(msg[key]).encode() for key in ("header", "parent_header", "metadata", "content")
    ]
    channel_bytes = channel.encode()
    offsets = [8 * (1 + 1 + len(parts) + 1)]
    offsets.append(offsets[-1] + len(channel_bytes))
    for part in parts:
        offsets.append(offsets[-1] + len(part))
    head = len(offsets).to_bytes(8, "little") + b"".join(o.to_bytes(8, "little") for o in offsets)
    return head + channel_bytes + b"".join(parts)


def decode_v1(data: bytes) -> dict[str, Any]:
    """Return the message framed in `data` (v1 binary protocol), with a `channel` key."""
    count = int.from_bytes(data[:8], "little")
    offsets = [int.from_bytes(data[8 * (i + 1) : 8 * (i + 2)], "little") for i in range(count)]
    channel = data[offsets[0] : offsets[1]].decode()
    parts = [data[offsets[i] : offsets[i + 1]] for i in range(1, count - 1)]
    keys = ("header", "parent_header", "metadata", "content")
    msg = {key: json.loads(part) for key, part in zip(keys, parts, strict=False)}
    msg["channel"] = channel
    return msg


class KernelWebsocket:
    """One websocket connection to /api/kernels/{id}/channels."""

    def __init__(self, url: str, token: str, kernel_id: str, *, binary: bool) -> None:
        self.url = url.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels"
        self.token = token
        self.binary = binary
        self.session = uuid.uuid4().hex
        self.ws: Any = None

    async def __aenter__(self) -> KernelWebsocket:
        self.ws = await websockets.connect(
            f"{self.url}?session_id={self.session}",
            additional_headers={"Authorization": f"token {self.token}"},
            subprotocols=[V1] if self.binary else None,  # type: ignore[list-item]
            max_size=None,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()

    def message(
        self, msg_type: str, content: dict[str, Any], parent: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Return a new message dict."""
        header = {
            "msg_id": uuid.uuid4().hex,
            "msg_type": msg_type,
            "username": "test",
            "session": self.session,
            "date": datetime.now(timezone.utc).isoformat(),
            "version": "5.3",
        }
        return {"header": header, "parent_header": parent or {}, "metadata": {}, "content": content}

    async def send(self, channel: str, msg: dict[str, Any]) -> None:
        """Send `msg` on `channel`."""
        if self.binary:
            await self.ws.send(encode_v1(channel, msg))
        else:
            await self.ws.send(json.dumps({**msg, "channel": channel}))

    async def receive(self) -> dict[str, Any]:
        """Return the next message (with its `channel`)."""
        data = await self.ws.recv()
        if isinstance(data, bytes):
            return decode_v1(data)
        return json.loads(data)  # type: ignore[no-any-return]

    async def execute(self, code: str, *, allow_stdin: bool = False) -> str:
        """Send an execute_request; return its msg_id."""
        msg = self.message(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": allow_stdin,
                "stop_on_error": True,
            },
        )
        await self.send("shell", msg)
        return str(msg["header"]["msg_id"])

    async def run(self, code: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Execute `code`; return the execute_reply and the IOPub messages it caused.

        Returns once both the reply and IOPub `idle` have arrived (their order is not fixed).
        """
        msg_id = await self.execute(code)
        reply: dict[str, Any] | None = None
        iopub: list[dict[str, Any]] = []
        idle = False
        while reply is None or not idle:
            msg = await self.receive()
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["channel"] == "shell":
                reply = msg
            elif msg["channel"] == "iopub":
                iopub.append(msg)
                content = msg["content"]
                idle = idle or (
                    msg["header"]["msg_type"] == "status" and content["execution_state"] == "idle"
                )
        return reply, iopub

    async def answer(self, msg_id: str, msg_type: str, timeout: float = 60) -> dict[str, Any]:
        """Return the next message of `msg_type` whose parent is `msg_id` (others are skipped)."""

        async def find() -> dict[str, Any]:
            while True:
                msg = await self.receive()
                parent = msg["parent_header"].get("msg_id")
                if parent == msg_id and msg["header"]["msg_type"] == msg_type:
                    return msg

        return await asyncio.wait_for(find(), timeout)
