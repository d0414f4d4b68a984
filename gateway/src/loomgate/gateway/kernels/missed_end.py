"""Our cells whose end the gateway may have missed: a kernel that drops IOPub messages the gateway
has not read yet (ZMQ's limit on a publisher loomgate cannot tune; an ipykernel one queues them,
kernels/iopub_queue.py) may drop a cell's idle, and the cell would run for ever. END_AFTER_REPLY
after one of our cells' execute_reply, if the cell has not ended, a silent execute is sent: it is
answered after the cell, so once its idle has come every IOPub message the cell caused has come,
or was dropped, and the cell ends by its reply (noted MISSED_END)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from loomgate.gateway.kernels.kernel_channels import KernelChannels, Message

END_AFTER_REPLY = 0.5
# The note of a cell ended by its reply: the messages before its idle may be missing too.
MISSED_END = (
    "the gateway missed the cell's end (it could not read the kernel's messages for a while); "
    "its reply ended it, and output may be missing"
)


class Ending(Protocol):
    """What the check asks of the tracker of a kernel's cells."""

    def ending_pending(self, msg_id: str) -> bool:
        """Return whether our cell `msg_id` is known and has not ended (nor is ending)."""

    def end_by_reply(self, msg_id: str, reply: Message) -> None:
        """End our cell `msg_id` as its `reply` says, if it has not ended meanwhile."""


def check_after_reply(
    msg_id: str,
    reply: asyncio.Future[Message],
    cells: Ending,
    channels: Callable[[], KernelChannels | None],
    spawn: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """Check, END_AFTER_REPLY after our cell `msg_id`'s execute_reply `reply`, that its end was
    seen; if not, end it by its reply once the kernel has drained (`channels`: the kernel's
    channels then, `spawn`: where the wait runs)."""
    if reply.cancelled() or reply.exception() is not None or not cells.ending_pending(msg_id):
        return

    def check() -> None:
        if cells.ending_pending(msg_id):
            spawn(end_if_missed(msg_id, reply.result(), cells, channels()))

    asyncio.get_running_loop().call_later(END_AFTER_REPLY, check)


async def end_if_missed(
    msg_id: str, reply: Message, cells: Ending, channels: KernelChannels | None
) -> None:
    """End our cell `msg_id` as its `reply` says once everything before a silent execute sent now
    has come, if its idle (or even its start) was lost."""
    if channels is None:
        return
    drained = asyncio.ensure_future(channels.drain())
    try:
        await asyncio.wait([drained])
    finally:
        drained.cancel()
    if drained.cancelled() or drained.exception() is not None:
        return  # the channels closed: the kernel died, restarts or stops
    cells.end_by_reply(msg_id, reply)
