"""What loomgate asks of a kernel and waits for, over any transport: replies by request, IOPub
proof, silent runs, draining. A transport (ZMQ here, a websocket upstream) subclasses it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from jupyter_client.session import Session

from loomgate.gateway.kernels.message_sequence import MessageSequence

Message = dict[str, Any]
Handler = Callable[[Message], None]
Channel = Literal["shell", "control", "stdin"]

NUDGE_INTERVAL = 0.2
DRAIN_AGAIN = 1.0  # seconds after a drain's reply without its idle: asked again (dropped)
# A kernel that answered kernel_info but published nothing for it (a busy kernel taken back,
# whose shell requests wait behind its cell) is ready this long after its first reply.
REPLY_ENOUGH = 2.0
SHELL_INFO_TIMEOUT = 10.0  # for the whole kernel_info reply on shell, where control's was bare
WELCOME = "iopub_welcome"  # what a kernel with an XPUB socket sends each new subscriber


def replied_ok(reply: asyncio.Future[Message]) -> bool:
    """Return whether an execute_reply has arrived and says `ok`."""
    return reply.done() and not reply.cancelled() and reply.result()["content"]["status"] == "ok"


class KernelChannels:
    """The requests loomgate sends a kernel, matched to their replies; IOPub and stdin messages
    handed on. Subclasses send (`_send`) and deliver what arrives to `_iopub_message`,
    `_reply` and `on_stdin`.

    `confirm()` proves IOPub live before anything is executed: a late subscriber misses messages.
    """

    local = False  # to a process on this machine, over ZMQ (its IOPub socket can be told more)

    def __init__(self, session: Session, *, on_iopub: Handler, on_stdin: Handler) -> None:
        self.session = session
        self._on_iopub = on_iopub
        self.on_stdin = on_stdin
        self._replies: dict[str, asyncio.Future[Message]] = {}
        self._probes: set[str] = set()
        self._asked: set[str] = set()  # the gateway's own questions: their IOPub is not news
        self._iopub_seen: asyncio.Future[None] | None = None
        self._idle_waiters: dict[str, asyncio.Future[None]] = {}
        self._silent_output: dict[str, list[str]] = {}  # stream text of silent runs, by msg_id
        self.sequence = MessageSequence()  # what the kernel sent that never arrived
        self.confirming = False  # while `confirm` waits for the kernel's first answer
        self.start_failure: str | None = None  # why the kernel will not answer (its transport's)

    def _send(self, channel: Channel, msg: Message) -> None:
        """Send `msg` (made by the session) on `channel`."""
        raise NotImplementedError

    async def _open(self, timeout: float) -> None:
        """Return once the transport is open (RuntimeError saying why if it cannot open)."""

    async def _connected(self, timeout: float) -> None:
        """Return once the transport can carry every channel (an input_request included)."""

    def catch_up(self) -> None:
        """Handle the IOPub messages already received and not yet handled (where a transport
        can hold some back)."""

    def _iopub_message(self, msg: Message) -> None:
        self.sequence.see(str(msg["header"].get("msg_id", "")))
        parent_id = msg["parent_header"].get("msg_id")
        if parent_id in self._probes or msg["header"]["msg_type"] == WELCOME:
            if self._iopub_seen is not None and not self._iopub_seen.done():
                self._iopub_seen.set_result(None)
            return
        if parent_id in self._asked:
            if (
                msg["header"]["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            ):
                self._asked.discard(parent_id)
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
        self.sequence.see(str(msg["header"].get("msg_id", "")))
        future = self._replies.pop(msg["parent_header"].get("msg_id", ""), None)
        if future is not None and not future.done():
            future.set_result(msg)

    def _send_expecting_reply(
        self, msg_type: str, content: dict[str, Any], channel: Channel = "shell"
    ) -> tuple[str, asyncio.Future[Message]]:
        msg = self.session.msg(msg_type, content)
        self._send(channel, msg)
        msg_id = msg["header"]["msg_id"]
        future = self._replies[msg_id] = asyncio.get_running_loop().create_future()
        return msg_id, future

    async def ask(self, msg_type: str, content: dict[str, Any], timeout: float) -> Message:
        """Send a shell request of the gateway's own (a question about the kernel, not a use of
        it) and return its reply; what it causes on IOPub is not the kernel's activity."""
        msg_id, future = self._send_expecting_reply(msg_type, content)
        self._asked.add(msg_id)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._replies = {k: f for k, f in self._replies.items() if f is not future}

    async def request(self, msg_type: str, content: dict[str, Any], timeout: float) -> Message:
        """Send a shell request and return its reply (TimeoutError after `timeout` seconds)."""
        _, future = self._send_expecting_reply(msg_type, content)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._replies = {k: f for k, f in self._replies.items() if f is not future}

    async def confirm(self, timeout: float, alive: Callable[[], bool]) -> Message:
        """Return a kernel_info reply once IOPub is proven subscribed (messages reach us), or,
        for a kernel that publishes nothing a probe could cause, REPLY_ENOUGH seconds after
        its first reply.

        Like jupyter_server's nudge: keep sending kernel_info requests until a reply has come
        back and IOPub has delivered a message caused by one of them (or the kernel's welcome
        to a new subscriber). They go on the control channel, which a kernel answers even while
        a cell runs (a kernel taken back mid-cell); once it has answered there with nothing on
        IOPub, on shell too, for a kernel that publishes no status for control (ipymini, Deno).
        The next request goes after NUDGE_INTERVAL, or as soon as a reply comes with nothing on
        IOPub yet: the kernel is up and only its IOPub subscription is still on the way.
        """
        loop = asyncio.get_running_loop()
        iopub_seen: asyncio.Future[None] = loop.create_future()
        self._iopub_seen = iopub_seen
        deadline = loop.time() + timeout
        await self._open(timeout)
        replies: list[asyncio.Future[Message]] = []
        on_shell: list[str] = []
        answered_at: float | None = None
        self.confirming = True
        try:
            while loop.time() < deadline:
                if not alive():
                    raise RuntimeError("the kernel process exited while starting")
                if self.start_failure is not None:
                    raise RuntimeError(self.start_failure)
                msg_id, future = self._send_expecting_reply("kernel_info_request", {}, "control")
                self._probes.add(msg_id)
                replies.append(future)
                if answered_at is not None:
                    shell_id, shell_reply = self._send_expecting_reply("kernel_info_request", {})
                    self._probes.add(shell_id)
                    on_shell.append(shell_id)
                    replies.append(shell_reply)
                nudge_at = min(loop.time() + NUDGE_INTERVAL, deadline)
                while True:
                    pending: list[asyncio.Future[Any]] = [*replies, iopub_seen]
                    waiting = [f for f in pending if not f.done()]
                    done, _ = await asyncio.wait(
                        waiting,
                        timeout=max(0.0, nudge_at - loop.time()),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    answered = [f.result() for f in replies if f.done() and not f.cancelled()]
                    if answered and answered_at is None:
                        answered_at = loop.time()
                    enough = answered_at is not None and loop.time() - answered_at >= REPLY_ENOUGH
                    if answered and (iopub_seen.done() or enough):
                        await self._connected(max(0.0, deadline - loop.time()))
                        told = [a for a in answered if "language_info" in a["content"]]
                        return told[0] if told else await self._told(answered[0], deadline)
                    if not done or future.done():
                        break
        finally:
            self.confirming = False
            for future in replies:
                future.cancel()
            self._probes.clear()
            self._asked.update(on_shell)  # what they still cause on IOPub is not news
        raise TimeoutError(f"the kernel did not answer kernel_info within {timeout:.0f} s")

    async def _told(self, bare: Message, deadline: float) -> Message:
        """Return the whole kernel_info reply of a kernel whose control reply was `bare`
        (ipymini's says only `ok`), asked on shell; `bare` when no answer comes in time (a busy
        kernel taken back: its shell requests wait behind its cell)."""
        wait = min(SHELL_INFO_TIMEOUT, max(0.0, deadline - asyncio.get_running_loop().time()))
        try:
            return await self.ask("kernel_info_request", {}, wait)
        except asyncio.TimeoutError:
            return bare

    async def drain(self) -> None:
        """Return once the kernel has finished everything sent to it before this call.

        A silent, empty execute queues behind them on shell; its IOPub `idle` comes after every
        message they caused, on the same socket. A publisher that drops messages (ZMQ's limit,
        while its subscriber is behind) may drop that idle too: one not come DRAIN_AGAIN after
        its reply is asked for again, until one comes.
        """
        while True:
            run = self.send_silently("", {})
            try:
                await run.reply
                done, _ = await asyncio.wait({run.idle}, timeout=DRAIN_AGAIN)
                if done:
                    run.idle.result()  # CancelledError: the channels closed
                    return
            finally:
                self.forget_silent(run.msg_id)

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
        self._send("shell", msg)
        return msg

    def cell_message(self, content: dict[str, Any]) -> Message:
        """Return an execute_request of `content`, not sent yet (its msg_id is known)."""
        return self.session.msg("execute_request", content)

    def send_cell(self, msg: Message) -> asyncio.Future[Message]:
        """Send the execute_request `msg`; return the future of its execute_reply."""
        self._send("shell", msg)
        future = self._replies[msg["header"]["msg_id"]] = asyncio.get_running_loop().create_future()
        return future

    def send_stdin(self, msg_type: str, content: dict[str, Any], parent: Message) -> None:
        """Send a stdin message (an input_reply) answering `parent`."""
        self._send("stdin", self.session.msg(msg_type, content, parent=parent))

    def close(self) -> None:
        """Stop waiting: whoever waits on this kernel's replies or idle is told (cancelled)."""
        waiters: list[asyncio.Future[Any]] = [*self._idle_waiters.values(), *self._replies.values()]
        for waiter in waiters:
            waiter.cancel()
        self._idle_waiters.clear()


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
