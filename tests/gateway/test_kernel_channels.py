"""A kernel's channels: how `confirm` proves them live, and the gateway's ZMQ sockets' options."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import zmq
from jupyter_client.ioloop.manager import AsyncIOLoopKernelManager
from jupyter_client.session import Session

from loomgate.gateway.kernels import kernel_channels
from loomgate.gateway.kernels.kernel_channels import Channel, KernelChannels, Message
from loomgate.gateway.kernels.zmq_channels import (
    IOPUB_RCVHWM,
    RECONNECT_INTERVAL_MS,
    ZmqChannels,
    channel_url,
)


class LateSubscriber(KernelChannels):
    """A kernel that answers every kernel_info at once, while its IOPub carries nothing of the
    first `missed` requests (the gateway's subscription was not through yet), and nothing of a
    request on a channel of `silent_on` (ipymini and Deno publish no status for control)."""

    def __init__(self, missed: int, silent_on: tuple[Channel, ...] = ()) -> None:
        super().__init__(Session(), on_iopub=lambda msg: None, on_stdin=lambda msg: None)
        self.missed = missed
        self.silent_on = silent_on
        self.sent: list[tuple[Channel, Message]] = []

    def _send(self, channel: Channel, msg: Message) -> None:
        self.sent.append((channel, msg))
        asyncio.get_running_loop().call_soon(self._answer, channel, msg)

    bare_on_control = False  # ipymini answers kernel_info on control with a bare `ok`

    def _answer(self, channel: Channel, request: Message) -> None:
        parent = {"msg_id": request["header"]["msg_id"], "msg_type": "kernel_info_request"}
        reply = {"header": {"msg_type": "kernel_info_reply"}, "parent_header": parent}
        content: dict[str, object] = {"implementation": "ipython", "language_info": {}}
        if self.bare_on_control and channel == "control":
            content = {"status": "ok"}
        self._reply({**reply, "metadata": {}, "content": content})
        if len(self.sent) > self.missed and channel not in self.silent_on:
            status = {"header": {"msg_type": "status"}, "parent_header": parent}
            self._iopub_message({**status, "metadata": {}, "content": {"execution_state": "idle"}})


class Unanswering(KernelChannels):
    """A kernel that is not up yet: requests wait in the socket, nothing comes back."""

    def __init__(self) -> None:
        super().__init__(Session(), on_iopub=lambda msg: None, on_stdin=lambda msg: None)
        self.sent: list[Message] = []

    def _send(self, channel: Channel, msg: Message) -> None:
        self.sent.append(msg)


async def test_a_reply_with_nothing_on_iopub_yet_is_asked_again_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Were the next request to wait for the interval, this confirm would take a minute.
    monkeypatch.setattr(kernel_channels, "NUDGE_INTERVAL", 60.0)
    channels = LateSubscriber(missed=3)
    reply = await asyncio.wait_for(channels.confirm(120.0, alive=lambda: True), 5.0)
    assert reply["content"]["implementation"] == "ipython"
    # Once the kernel has answered with nothing on IOPub, each request goes on shell too.
    sent = [channel for channel, _ in channels.sent]
    assert sent == ["control", "control", "shell", "control", "shell"]
    assert {msg["header"]["msg_type"] for _, msg in channels.sent} == {"kernel_info_request"}


async def test_a_kernel_that_publishes_no_status_for_control_is_proved_on_shell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kernel_channels, "NUDGE_INTERVAL", 60.0)
    monkeypatch.setattr(kernel_channels, "REPLY_ENOUGH", 60.0)
    channels = LateSubscriber(missed=0, silent_on=("control",))
    await asyncio.wait_for(channels.confirm(120.0, alive=lambda: True), 5.0)
    assert [channel for channel, _ in channels.sent] == ["control", "control", "shell"]


async def test_a_kernel_that_answers_and_publishes_nothing_is_ready_after_its_reply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A kernel taken back mid-cell: its shell requests wait behind the cell, and control's
    # cause nothing on IOPub. Its reply alone makes it ready, not the whole timeout.
    monkeypatch.setattr(kernel_channels, "NUDGE_INTERVAL", 0.05)
    monkeypatch.setattr(kernel_channels, "REPLY_ENOUGH", 0.3)
    channels = LateSubscriber(missed=0, silent_on=("control", "shell"))
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.wait_for(channels.confirm(120.0, alive=lambda: True), 5.0)
    assert 0.3 <= loop.time() - began < 2.0


async def test_what_shell_probes_cause_after_the_proof_is_not_the_kernels_activity() -> None:
    seen: list[Message] = []
    channels = LateSubscriber(missed=0, silent_on=("control",))
    channels._on_iopub = seen.append
    await asyncio.wait_for(channels.confirm(120.0, alive=lambda: True), 5.0)
    probes = [msg for channel, msg in channels.sent if channel == "shell"]
    late = {"msg_id": probes[-1]["header"]["msg_id"], "msg_type": "kernel_info_request"}
    for state in ("busy", "idle"):
        status = {"header": {"msg_type": "status"}, "parent_header": late, "metadata": {}}
        channels._iopub_message({**status, "content": {"execution_state": state}})
    assert seen == []


async def test_the_welcome_a_kernel_sends_a_new_subscriber_proves_iopub() -> None:
    channels = LateSubscriber(missed=10**6)  # no status ever comes

    async def welcome() -> None:
        await asyncio.sleep(0.05)
        header = {"msg_type": "iopub_welcome"}
        channels._iopub_message(
            {"header": header, "parent_header": {}, "metadata": {}, "content": {}}
        )

    asyncio.get_running_loop().create_task(welcome())
    began = asyncio.get_running_loop().time()
    await asyncio.wait_for(channels.confirm(120.0, alive=lambda: True), 5.0)
    assert asyncio.get_running_loop().time() - began < kernel_channels.REPLY_ENOUGH


async def test_a_kernel_that_never_answers_is_asked_once_per_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kernel_channels, "NUDGE_INTERVAL", 0.05)
    channels = Unanswering()
    with pytest.raises(TimeoutError, match="did not answer kernel_info within 1 s"):
        await channels.confirm(1.0, alive=lambda: True)
    assert 2 <= len(channels.sent) <= 21, len(channels.sent)  # again, not in a busy loop


async def test_the_gateways_sockets_try_a_refused_connect_again_soon(tmp_path: Path) -> None:
    km = AsyncIOLoopKernelManager(transport="ipc", ip=str(tmp_path / "kernel"))
    km.write_connection_file()
    channels = ZmqChannels(km, on_iopub=lambda msg: None, on_stdin=lambda msg: None)
    try:
        sockets = [channels.iopub, channels.shell, channels.control, channels.stdin]
        intervals = [stream.socket.getsockopt(zmq.RECONNECT_IVL) for stream in sockets]
        assert intervals == [RECONNECT_INTERVAL_MS] * 4
        assert RECONNECT_INTERVAL_MS < 100  # ZMQ's default, which starts no kernel sooner
        assert channels.iopub.socket.rcvhwm == IOPUB_RCVHWM == 0  # no IOPub message dropped
    finally:
        channels.close()
        km.context.destroy(linger=0)  # its sockets' fds are closed now, not at a later collection
        km.cleanup_connection_file()


async def test_a_message_whose_handling_fails_leaves_the_next_ones_handled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    km = AsyncIOLoopKernelManager(transport="ipc", ip=str(tmp_path / "kernel"))
    km.write_connection_file()
    seen: list[int] = []
    last = asyncio.get_running_loop().create_future()

    def on_iopub(msg: Message) -> None:
        seen.append(msg["content"]["n"])
        if msg["content"]["n"] == 0:
            raise RuntimeError("a bug in handling one message")
        if msg["content"]["n"] == 9:
            last.set_result(None)

    kernel_iopub: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.XPUB)  # as ipykernel
    kernel_iopub.bind(channel_url(km.get_connection_info(), "iopub"))
    channels = ZmqChannels(km, on_iopub=on_iopub, on_stdin=lambda msg: None)
    try:
        assert kernel_iopub.poll(10_000), "the gateway did not subscribe"
        kernel_iopub.recv()  # its subscription
        for n in range(10):
            km.session.send(kernel_iopub, "stream", {"n": n})
        await asyncio.wait_for(last, 10)
        assert seen == list(range(10))
        assert "handling the kernel's stream message failed" in caplog.text
    finally:
        channels.close()
        kernel_iopub.close(linger=0)
        km.context.destroy(linger=0)
        km.cleanup_connection_file()


async def test_a_bare_reply_on_control_is_completed_by_one_on_shell() -> None:
    channels = LateSubscriber(missed=0)
    channels.bare_on_control = True
    reply = await asyncio.wait_for(channels.confirm(120.0, alive=lambda: True), 5.0)
    assert reply["content"] == {"implementation": "ipython", "language_info": {}}
    assert [channel for channel, _ in channels.sent] == ["control", "shell"]
