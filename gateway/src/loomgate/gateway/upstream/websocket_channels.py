"""The gateway's own websocket to a kernel on the upstream: every channel, as JSON frames."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Callable
from typing import Any

from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.services.kernels.connection.base import deserialize_binary_message
from jupyter_server.utils import url_escape, url_path_join
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from loomgate.gateway.errors import Unavailable
from loomgate.gateway.kernels.kernel_channels import Channel, Handler, KernelChannels, Message

# Outputs come as whole messages: a large image or a long print must not close the socket.
MAX_MESSAGE_BYTES = 512 * 1024 * 1024
QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux only
# Status messages the upstream server (not the kernel) sends on its own restarts and deaths.
SERVER_STATES = ("restarting", "dead")
# What a kernel broadcasts as it shuts down for good (someone stopped it on the upstream).
SHUTDOWN = "shutdown"


def channels_url(kernel_id: str, session_id: str) -> str:
    """Return the websocket URL of a kernel's channels on the upstream."""
    client = GatewayClient.instance()
    url = url_path_join(
        client.ws_url or "", client.kernels_endpoint, url_escape(kernel_id), "channels"
    )
    return f"{url}?session_id={url_escape(session_id)}"


# How a Jupyter Server's notice of its IOPub rate limit begins (jupyter_server's
# ZMQChannelsWebsocketConnection): what it holds back after it never reaches us.
RATE_NOTICES = ("IOPub message rate exceeded.", "IOPub data rate exceeded.")


class WebsocketChannels(KernelChannels):
    """One websocket to the upstream's kernel channels, opened at once and proven by `confirm`.

    The upstream sends IOPub to every websocket of the kernel, so loomgate sees the cells any
    client runs; input_request and replies come only to the websocket that asked. A socket that
    closes without `close()` is reported to `on_lost` (the kernel, or the upstream, went away).
    """

    def __init__(
        self,
        kernel_id: str,
        session: Session,
        session_id: str,
        *,
        on_iopub: Handler,
        on_stdin: Handler,
        on_server_state: Callable[[str], None],
        on_lost: Callable[[], None],
        describe: Callable[[BaseException], str],
    ) -> None:
        super().__init__(session, on_iopub=on_iopub, on_stdin=on_stdin)
        self._on_server_state = on_server_state
        self._on_lost = on_lost
        self._describe = describe
        self._closed = False
        self._pending: list[str] = []  # frames sent before the socket opened
        self._start_failed = asyncio.Event()  # set by `fail_start`
        self.ws: WebSocketClientConnection | None = None
        # The kernel's one session id: the upstream keeps the messages of a dropped socket for
        # it and replays them when the socket is opened again.
        request = HTTPRequest(
            channels_url(kernel_id, session_id),
            **GatewayClient.instance().load_connection_args(),
        )
        self._opening = asyncio.ensure_future(
            websocket_connect(
                request, on_message_callback=self._receive, max_message_size=MAX_MESSAGE_BYTES
            )
        )
        self._opening.add_done_callback(self._opened)

    def _opened(self, future: asyncio.Future[WebSocketClientConnection]) -> None:
        if future.cancelled() or future.exception() is not None:
            return  # `_open` reports it
        self.ws = future.result()
        if self._closed:
            self.ws.close()
            return
        protocol = self.ws.protocol
        assert protocol is not None  # set once the connection opened, cleared only by close()
        protocol.set_nodelay(True)
        for frame in self._pending:
            self.ws.write_message(frame)
        self._pending.clear()

    async def _open(self, timeout: float) -> None:
        """Return once the socket is open (RuntimeError saying why if it did not open, or if
        the kernel's start failed meanwhile: `fail_start`)."""
        failed = asyncio.ensure_future(self._start_failed.wait())
        try:
            waits: set[asyncio.Future[Any]] = {asyncio.shield(self._opening), failed}
            done, _ = await asyncio.wait(
                waits,
                timeout=timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if self.start_failure is not None:
                raise RuntimeError(self.start_failure)
            if not done:
                raise asyncio.TimeoutError
            self._opening.result()
        except (asyncio.TimeoutError, RuntimeError):
            raise
        except Exception as e:
            raise RuntimeError(self._describe(e)) from None
        finally:
            failed.cancel()

    def fail_start(self, reason: str) -> None:
        """End the start in progress: the kernel will not answer (`reason`)."""
        self.start_failure = reason
        self._start_failed.set()

    def _send(self, channel: Channel, msg: Message) -> None:
        if self._closed:
            raise Unavailable("the connection to the upstream dropped; it is being opened again")
        frame = json.dumps({**msg, "channel": channel, "buffers": []}, default=json_default)
        if self.ws is None:
            self._pending.append(frame)
        else:
            self.ws.write_message(frame)

    def _receive(self, frame: str | bytes | None) -> None:
        if frame is None:
            self._lost()
            return
        self._acknowledge_now()
        msg: Message = (
            json.loads(frame) if isinstance(frame, str) else deserialize_binary_message(frame)
        )
        msg["parent_header"] = msg.get("parent_header") or {}  # null from some kernels
        channel = msg.get("channel")
        if channel == "iopub":
            msg_type = msg["header"].get("msg_type")
            state = msg["content"].get("execution_state")
            if msg_type == "stream" and held_back_notice(msg["content"].get("text")):
                self.sequence.upstream_held_back()  # noted with the notice, in the record
            if msg_type == "status" and state in SERVER_STATES and self.confirming:
                # It died before it answered: the upstream's restarts are not this start's.
                self.fail_start(f"the kernel died as it started (the upstream says {state})")
            elif msg_type == "status" and state in SERVER_STATES:
                self._on_server_state(state)
            elif msg_type == "shutdown_reply" and not msg["content"].get("restart"):
                self._on_server_state(SHUTDOWN)
            self._iopub_message(msg)
        elif channel in ("shell", "control"):
            self._reply(msg)
        elif channel == "stdin":
            self.on_stdin(msg)

    def _acknowledge_now(self) -> None:
        """ACK what arrived at once rather than up to 40 ms later.

        jupyter_server leaves Nagle's algorithm on for its kernel websockets, so its second
        small frame of a reply waits for the ACK of the first; Linux delays that ACK unless
        asked (TCP_QUICKACK lasts until the next segment, so it is asked again per message).
        """
        if QUICKACK is None or self.ws is None or self.ws.protocol is None:
            return
        stream = self.ws.protocol.stream
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.socket.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)

    def _lost(self) -> None:
        if self._closed:
            return
        self.close()
        self._on_lost()

    def close(self) -> None:
        """Close the socket; whoever waits on this kernel's replies stops waiting."""
        self._closed = True
        super().close()
        if self.ws is not None:
            self.ws.close()
        elif not self._opening.done():
            self._opening.cancel()


def held_back_notice(text: object) -> bool:
    """Return whether a stream's text is a Jupyter Server's notice that it stops sending a
    kernel's output for a while (its IOPub message or data rate limit)."""
    return isinstance(text, str) and text.startswith(RATE_NOTICES)
