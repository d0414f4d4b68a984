"""An ipykernel kernel's IOPub socket told to queue what a subscriber has not read yet rather
than drop it: ZMQ's default high-water mark, 1,000 messages, loses a fast loop's lines (and at
times a cell's end) whenever the gateway's ZMQ thread falls that far behind, as on a loaded
machine. Queued, they wait in the kernel's memory (counted against its limit) until read.

A private use of ipykernel, kept to this module: its kernel's `iopub_thread`, the thread's
`io_loop` and `socket` (tests/gateway/test_iopub_flood.py reads the option back from a kernel).
The option is set on the socket's own thread; libzmq applies it to connections already made.
"""

from __future__ import annotations

import asyncio
import logging

from loomgate.gateway.kernels.kernel_channels import KernelChannels, Message

QUEUE_EVERY_MESSAGE = (
    "(lambda thread: thread.io_loop.add_callback("
    "thread.socket.setsockopt, __import__('zmq').SNDHWM, 0))"
    "(get_ipython().kernel.iopub_thread)"
)


def queue_every_message(channels: KernelChannels, log: logging.Logger, kernel: str) -> None:
    """Make the IOPub socket of `kernel` (an ipykernel one) keep every message for its
    subscribers, before any cell sent after (shell requests run in order); a kernel that cannot
    is logged, and runs on dropping as before."""
    run = channels.send_silently(QUEUE_EVERY_MESSAGE, {})

    def check(reply: asyncio.Future[Message]) -> None:
        channels.forget_silent(run.msg_id)
        if reply.cancelled():
            return
        content = reply.result()["content"]
        if content.get("status") != "ok":
            log.warning(
                "Kernel %s: its IOPub may drop messages under load: %s: %s",
                kernel,
                content.get("ename"),
                content.get("evalue"),
            )

    run.reply.add_done_callback(check)
