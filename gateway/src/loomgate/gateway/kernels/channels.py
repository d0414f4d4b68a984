"""The gateway's own ZMQ connections to one kernel process: IOPub, shell, stdin, control."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from hmac import compare_digest
from typing import Any, cast

import zmq
from jupyter_client.session import Session
from zmq.eventloop.zmqstream import ZMQStream
from zmq.utils.monitor import parse_monitor_message

Message = dict[str, Any]
Handler = Callable[[Message], None]

NUDGE_INTERVAL = 0.2


def channel_url(info: dict[str, Any], channel: str) -> str:
    """Return the ZMQ address of one of a kernel's channels, from its connection info."""
    port = info[f"{channel}_port"]
    if info["transport"] == "tcp":
        return f"tcp://{info['ip']}:{port}"
    return f"{info['transport']}://{info['ip']}-{port}"


class KernelChannels:
    """IOPub subscriber, a shell/stdin pair sharing one identity (so input_request finds us),
    and a control socket for the requests a busy kernel must still answer.

    The IOPub socket is opened as soon as the kernel process is launched, and `confirm()` proves
    the subscription is live before anything is executed: a late ZMQ subscriber misses messages.
    """

    def __init__(self, km: Any, *, on_iopub: Handler, on_stdin: Handler) -> None:
        self.session: Session = km.session
        identity = uuid.uuid4().hex.encode()
        self._on_iopub = on_iopub
        self._replies: dict[str, asyncio.Future[Message]] = {}
        self._probes: set[str] = set()
        self._iopub_seen: asyncio.Future[None] | None = None
        self._idle_waiters: dict[str, asyncio.Future[None]] = {}
        self._silent_output: dict[str, list[str]] = {}  # stream text of silent runs, by msg_id
        self.iopub: ZMQStream = km.connect_iopub()
        self.shell: ZMQStream = km.connect_shell(identity=identity)
        self.control: ZMQStream = km.connect_control()
        self.stdin, self._stdin_monitor = self._monitored_stdin(km, identity)
        self._stdin_ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stdin_monitor.on_recv(self._stdin_event)
        self.iopub.on_recv(self._receiver(self._iopub_message))
        self.shell.on_recv(self._receiver(self._reply))
        self.control.on_recv(self._receiver(self._reply))
        self.stdin.on_recv(self._receiver(on_stdin))

    @staticmethod
    def _monitored_stdin(km: Any, identity: bytes) -> tuple[ZMQStream, ZMQStream]:
        """Return the stdin DEALER and a monitor of its handshake, watched before connecting.

        The kernel's stdin ROUTER drops an input_request addressed to a peer whose handshake is
        not done, and the cell then waits for ever: `confirm()` waits for this handshake.
        """
        # Made as jupyter_client makes the other channels' sockets: on the manager's context
        # (shadowed, for the plain sockets ZMQStream needs), with the kernel's CurveZMQ keys
        # when transport encryption is on.
        socket: zmq.Socket[bytes] = zmq.Context.shadow(km.context).socket(zmq.DEALER)
        socket.linger = 1000
        socket.identity = identity
        if km.curve_publickey is not None:
            socket.curve_secretkey = km.curve_secretkey
            socket.curve_publickey = km.curve_publickey
            socket.curve_serverkey = km.curve_publickey
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
            handler(
                {
                    "header": unpack(parts[1]),
                    "parent_header": unpack(parts[2]),
                    "metadata": unpack(parts[3]),
                    "content": unpack(parts[4]),
                }
            )

        return receive

    def _iopub_message(self, msg: Message) -> None:
        parent_id = msg["parent_header"].get("msg_id")
        if self._probes and parent_id in self._probes:
            if self._iopub_seen is not None and not self._iopub_seen.done():
                self._iopub_seen.set_result(None)
            return
        if parent_id in self._idle_waiters:
            msg_type = msg["header"]["msg_type"]
            if msg_type == "stream" and parent_id in self._silent_output:
                self._silent_output[parent_id].append(str(msg["content"].get("text", "")))
            elif msg_type == "status" and msg["content"]["execution_state"] == "idle":
                waiter = self._idle_waiters.pop(parent_id)
                if not waiter.done():
                    waiter.set_result(None)
            return
        self._on_iopub(msg)

    def _reply(self, msg: Message) -> None:
        future = self._replies.pop(msg["parent_header"].get("msg_id", ""), None)
        if future is not None and not future.done():
            future.set_result(msg)

    def _send_expecting_reply(
        self, msg_type: str, content: dict[str, Any], stream: ZMQStream | None = None
    ) -> tuple[str, asyncio.Future[Message]]:
        msg = self.session.msg(msg_type, content)
        self.session.send(stream or self.shell, msg)
        msg_id = msg["header"]["msg_id"]
        future = self._replies[msg_id] = asyncio.get_running_loop().create_future()
        return msg_id, future

    async def request(self, msg_type: str, content: dict[str, Any], timeout: float) -> Message:
        """Send a shell request and return its reply (TimeoutError after `timeout` seconds)."""
        _, future = self._send_expecting_reply(msg_type, content)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._replies = {k: f for k, f in self._replies.items() if f is not future}

    async def confirm(self, timeout: float, alive: Callable[[], bool]) -> Message:
        """Return a kernel_info reply once IOPub is proven subscribed (messages reach us).

        Like jupyter_server's nudge: keep sending kernel_info requests until one reply has come
        back and IOPub has delivered a message caused by one of them. They go on the control
        channel, which a kernel answers even while a cell runs (a kernel taken back mid-cell).
        """
        loop = asyncio.get_running_loop()
        self._iopub_seen = loop.create_future()
        deadline = loop.time() + timeout
        replies: list[asyncio.Future[Message]] = []
        try:
            while loop.time() < deadline:
                if not alive():
                    raise RuntimeError("the kernel process exited while starting")
                msg_id, future = self._send_expecting_reply("kernel_info_request", {}, self.control)
                self._probes.add(msg_id)
                replies.append(future)
                pending: list[asyncio.Future[Any]] = [*replies, self._iopub_seen]
                waiting = [f for f in pending if not f.done()]
                await asyncio.wait(waiting, timeout=NUDGE_INTERVAL)
                answered = [f.result() for f in replies if f.done()]
                if answered and self._iopub_seen.done():
                    remaining = max(0.0, deadline - loop.time())
                    await asyncio.wait_for(asyncio.shield(self._stdin_ready), remaining)
                    self._stop_monitor()
                    return answered[0]
        finally:
            for future in replies:
                future.cancel()
            self._probes.clear()
        raise TimeoutError(f"the kernel did not answer kernel_info within {timeout:.0f} s")

    async def drain(self) -> None:
        """Return once the kernel has finished everything sent to it before this call.

        A silent, empty execute queues behind them on shell; its IOPub `idle` comes after every
        message they caused, on the same socket.
        """
        content = {"code": "", "silent": True, "store_history": False, "allow_stdin": False}
        msg = self.session.msg("execute_request", content)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle_waiters[msg["header"]["msg_id"]] = waiter
        self.session.send(self.shell, msg)
        await waiter

    def send_silently(self, code: str, user_expressions: dict[str, str]) -> SilentRun:
        """Send `code` as a silent execute (IPython gives it no number, loomgate no record);
        return the run, whose output and reply arrive later."""
        content = {
            "code": code,
            "silent": True,
            "store_history": False,
            "user_expressions": user_expressions,
            "allow_stdin": False,
        }
        msg_id, reply = self._send_expecting_reply("execute_request", content)
        idle = self._idle_waiters[msg_id] = asyncio.get_running_loop().create_future()
        output = self._silent_output[msg_id] = []
        return SilentRun(msg_id, reply, idle, output, self)

    def forget_silent(self, msg_id: str) -> None:
        """Stop collecting the output of silent run `msg_id`."""
        self._silent_output.pop(msg_id, None)
        self._idle_waiters.pop(msg_id, None)

    def send_shell(self, msg_type: str, content: dict[str, Any]) -> Message:
        """Send a shell request and return the message sent (its header has the msg_id)."""
        msg = self.session.msg(msg_type, content)
        self.session.send(self.shell, msg)
        return msg

    def send_cell(self, content: dict[str, Any]) -> tuple[str, asyncio.Future[Message]]:
        """Send an execute_request; return its msg_id and the future of its execute_reply."""
        return self._send_expecting_reply("execute_request", content)

    def send_stdin(self, msg_type: str, content: dict[str, Any], parent: Message) -> None:
        """Send a stdin message (an input_reply) answering `parent`."""
        self.session.send(self.stdin, msg_type, content, parent=parent)

    def _stop_monitor(self) -> None:
        if not self._stdin_monitor.closed():
            self._stdin_monitor.on_recv(None)
            self.stdin.socket.disable_monitor()
            self._stdin_monitor.close(linger=0)

    def close(self) -> None:
        """Close every socket; whoever waits on this kernel's messages stops waiting."""
        self._stop_monitor()
        waiters: list[asyncio.Future[Any]] = [*self._idle_waiters.values(), *self._replies.values()]
        for waiter in waiters:
            waiter.cancel()
        self._idle_waiters.clear()
        for stream in (self.iopub, self.shell, self.stdin, self.control):
            if not stream.closed():
                stream.on_recv(None)
                stream.close(linger=0)


@dataclass
class SilentRun:
    """A silent execute sent to the kernel: its reply, its end (idle) and what it printed."""

    msg_id: str
    reply: asyncio.Future[Message]
    idle: asyncio.Future[None]
    output: list[str]
    channels: KernelChannels

    async def finished(self) -> tuple[Message, str]:
        """Return the execute_reply and the printed text, once the run has ended
        (ConnectionError if the channels closed first: the process went away)."""
        both: set[asyncio.Future[Any]] = {self.reply, self.idle}
        await asyncio.wait(both)
        self.channels.forget_silent(self.msg_id)
        if self.reply.cancelled() or self.idle.cancelled():
            raise ConnectionError("the kernel process went away")
        return self.reply.result(), "".join(self.output)
