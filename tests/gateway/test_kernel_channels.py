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
    first `missed` requests (the gateway's subscription was not through yet)."""

    def __init__(self, missed: int) -> None:
        super().__init__(Session(), on_iopub=lambda msg: None, on_stdin=lambda msg: None)
        self.missed = missed
        self.sent: list[tuple[Channel, Message]] = []

    def _send(self, channel: Channel, msg: Message) -> None:
        self.sent.append((channel, msg))
        asyncio.get_running_loop().call_soon(self._answer, msg)

    def _answer(self, request: Message) -> None:
        parent = {"msg_id": request["header"]["msg_id"], "msg_type": "kernel_info_request"}
        reply = {"header": {"msg_type": "kernel_info_reply"}, "parent_header": parent}
        self._reply({**reply, "metadata": {}, "content": {"implementation": "ipython"}})
        if len(self.sent) > self.missed:
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
    assert [channel for channel, _ in channels.sent] == ["control"] * 4
    assert {msg["header"]["msg_type"] for _, msg in channels.sent} == {"kernel_info_request"}


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
