"""The gateway's own ZMQ connections to a local kernel process: IOPub, shell, stdin, control."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from hmac import compare_digest
from typing import cast

import zmq
from jupyter_client.ioloop.manager import AsyncIOLoopKernelManager
from zmq.eventloop.zmqstream import ZMQStream
from zmq.utils.monitor import parse_monitor_message

from loomgate.gateway.kernels.kernel_channels import Channel, Handler, KernelChannels, Message

# The channels connect before the kernel has bound its sockets, and ZMQ tries a refused connect
# again after RECONNECT_IVL and a random part of it more: at ZMQ's default of 100 ms, a kernel's
# start waits up to 200 ms after its sockets are bound. Each try costs well under a millisecond
# of CPU, paid while a kernel starts and until the channels of one that died are closed.
RECONNECT_INTERVAL_MS = 10
log = logging.getLogger(__name__)

# ZMQ's default high-water mark, 1,000 messages, lets a kernel's PUB socket drop IOPub messages
# silently once the gateway's loop falls that far behind: lines of a fast loop, or a cell's idle
# (and the cell then never ends). Unbounded here, the gateway's ZMQ thread takes every message
# off the wire as it comes; a cell's output waits in the gateway's memory until the loop reads it.
IOPUB_RCVHWM = 0


def channel_url(info: Mapping[str, object], channel: str) -> str:
    """Return the ZMQ address of one of a kernel's channels, from its connection info."""
    port = info[f"{channel}_port"]
    if info["transport"] == "tcp":
        return f"tcp://{info['ip']}:{port}"
    return f"{info['transport']}://{info['ip']}-{port}"


def _socket(km: AsyncIOLoopKernelManager, kind: int) -> zmq.Socket[bytes]:
    """Return a socket as jupyter_client makes its channels' (on the manager's context, shadowed
    for the plain sockets ZMQStream needs; with the kernel's CurveZMQ keys when transport
    encryption is on), not yet connected, so options that apply to connections can be set."""
    socket: zmq.Socket[bytes] = zmq.Context.shadow(km.context).socket(kind)
    socket.linger = 1000
    socket.reconnect_ivl = RECONNECT_INTERVAL_MS  # a shadow has none of the context's options
    if km.curve_publickey is not None:
        socket.curve_secretkey = km.curve_secretkey
        socket.curve_publickey = km.curve_publickey
        socket.curve_serverkey = km.curve_publickey
    return socket


def _iopub(km: AsyncIOLoopKernelManager) -> zmq.Socket[bytes]:
    """Return the IOPub subscriber of `km`'s kernel: every message, none dropped here."""
    socket = _socket(km, zmq.SUB)
    socket.rcvhwm = IOPUB_RCVHWM
    socket.subscribe(b"")
    socket.connect(channel_url(km.get_connection_info(), "iopub"))
    return socket


class ZmqChannels(KernelChannels):
    """IOPub subscriber, a shell/stdin pair sharing one identity (so input_request finds us),
    and a control socket for the requests a busy kernel must still answer.

    The IOPub socket is opened as soon as the kernel process is launched.
    """

    local = True

    def __init__(
        self, km: AsyncIOLoopKernelManager, *, on_iopub: Handler, on_stdin: Handler
    ) -> None:
        super().__init__(km.session, on_iopub=on_iopub, on_stdin=on_stdin)
        km.context.setsockopt(zmq.RECONNECT_IVL, RECONNECT_INTERVAL_MS)  # for the sockets below
        identity = uuid.uuid4().hex.encode()
        self.iopub = ZMQStream(_iopub(km))
        self.shell: ZMQStream = km.connect_shell(identity=identity)
        self.control: ZMQStream = km.connect_control()
        self.stdin, self._stdin_monitor = self._monitored_stdin(km, identity)
        self._stdin_ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stdin_monitor.on_recv(self._stdin_event)
        self.iopub.on_recv(self._receiver(self._iopub_message))
        self.shell.on_recv(self._receiver(self._reply))
        self.control.on_recv(self._receiver(self._reply))
        self.stdin.on_recv(self._receiver(on_stdin))
        self._streams: dict[Channel, ZMQStream] = {
            "shell": self.shell,
            "control": self.control,
            "stdin": self.stdin,
        }

    @staticmethod
    def _monitored_stdin(
        km: AsyncIOLoopKernelManager, identity: bytes
    ) -> tuple[ZMQStream, ZMQStream]:
        """Return the stdin DEALER and a monitor of its handshake, watched before connecting.

        The kernel's stdin ROUTER drops an input_request addressed to a peer whose handshake is
        not done, and the cell then waits for ever: `confirm()` waits for this handshake.
        """
        socket = _socket(km, zmq.DEALER)
        socket.identity = identity
        monitor = socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        socket.connect(channel_url(km.get_connection_info(), "stdin"))
        return ZMQStream(socket), ZMQStream(monitor)

    def _stdin_event(self, parts: list[bytes]) -> None:
        event = parse_monitor_message(parts)["event"]
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED and not self._stdin_ready.done():
            self._stdin_ready.set_result(None)

    def _receiver(self, handler: Handler) -> Callable[[list[bytes]], None]:
        session = self.session
        unpack = session.unpack

        def receive(parts: list[bytes]) -> None:
            # Session.deserialize also parses every header date and adapts protocol versions:
            # a third of the gateway's time per message, and loomgate uses neither.
            _, frames = session.feed_identities(parts)  # copied frames: bytes
            parts = cast("list[bytes]", frames)
            if len(parts) < 5:
                return
            if session.auth is not None and not compare_digest(parts[0], session.sign(parts[1:5])):
                return
            msg = {
                "header": unpack(parts[1]),
                "parent_header": unpack(parts[2]) or {},  # null from some kernels
                "metadata": unpack(parts[3]),
                "content": unpack(parts[4]),
            }
            try:
                handler(msg)
            except Exception:
                # Raised into ZMQStream, it would leave the socket's later messages unread.
                log.exception("handling the kernel's %s message failed", msg["header"]["msg_type"])

        return receive

    def catch_up(self) -> None:
        """Handle the IOPub messages waiting in the socket now, rather than one per turn of the
        event loop: another client may already have seen the idle that ends a cell."""
        if not self.iopub.closed():
            self.iopub.flush(zmq.POLLIN)

    def _send(self, channel: Channel, msg: Message) -> None:
        self.session.send(self._streams[channel], msg)

    async def _connected(self, timeout: float) -> None:
        await asyncio.wait_for(asyncio.shield(self._stdin_ready), timeout)
        self._stop_monitor()

    def _stop_monitor(self) -> None:
        if not self._stdin_monitor.closed():
            self._stdin_monitor.on_recv(None)
            self.stdin.socket.disable_monitor()
            self._stdin_monitor.close(linger=0)

    def close(self) -> None:
        """Close every socket; whoever waits on this kernel's messages stops waiting."""
        self._stop_monitor()
        super().close()
        for stream in (self.iopub, self.shell, self.stdin, self.control):
            if not stream.closed():
                stream.on_recv(None)
                stream.close(linger=0)
