"""IOPub messages a kernel sent that never arrived, where loomgate cannot keep its publisher from
dropping them: ZMQ's high-water mark on a kernel that is not ipykernel (bash_kernel's publisher
loses a fast cell's lines whenever the gateway falls behind; an ipykernel one is told to keep
them, kernels/iopub_queue.py). A kernel built on jupyter_client's Session numbers every message
it sends, on any channel (`{session}_{pid}_{n}`): a run of numbers missing between two messages
that reached the gateway is what was dropped. One number alone is a reply the kernel sent another
client meanwhile, not a loss; a kernel whose ids are not numbered so is not judged. An upstream
server's notice that it holds back output (its IOPub rate limit) is a loss too, of a size nobody
tells."""

from __future__ import annotations

import re

from loomgate.shared.wire import DroppedBy

SESSION_ID = re.compile(r"(?P<sender>.+_\d+)_(?P<n>\d+)")
REPLY_TO_ANOTHER = 1  # numbers a reply to another client's request takes


class MessageSequence:
    """The last numbered message seen of one kernel, and how many were missing before the
    latest IOPub message."""

    def __init__(self) -> None:
        self._last: tuple[str, int] | None = None
        self.dropped = 0  # missing right before the latest message seen
        self.held_back = False  # the latest message is an upstream's notice that it drops some
        self._notice_next = False

    def upstream_held_back(self) -> None:
        """Note that the next message is an upstream server's notice that it holds back the
        kernel's output (a stock Jupyter Server's IOPub rate limit): how much, nobody says."""
        self._notice_next = True

    def loss(self, ipykernel: bool) -> tuple[int, DroppedBy] | None:
        """Return what was lost right before the latest message, and who lost it (None: nothing
        known): the upstream's notice, or a run the kernel dropped (not judged for ipykernel,
        which loomgate tells to keep every message)."""
        if self.held_back:
            return 0, "upstream"
        if self.dropped and not ipykernel:
            return self.dropped, "kernel"
        return None

    def see(self, msg_id: str) -> int:
        """Note message `msg_id` (any channel's); return how many of the kernel's messages were
        dropped before it (0 when none, or none can be told)."""
        self.held_back, self._notice_next = self._notice_next, False
        found = SESSION_ID.fullmatch(msg_id)
        if found is None:
            self._last, self.dropped = None, 0
            return 0
        sender, number = found["sender"], int(found["n"])
        last, self._last = self._last, (sender, number)
        missing = number - last[1] - 1 if last is not None and last[0] == sender else 0
        self.dropped = missing if missing > REPLY_TO_ANOTHER else 0
        return self.dropped
