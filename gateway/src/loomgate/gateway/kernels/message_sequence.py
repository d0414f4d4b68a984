"""IOPub messages a kernel sent that never arrived, where loomgate cannot keep its publisher from
dropping them: ZMQ's high-water mark on a kernel that is not a local ipykernel (bash_kernel's
publisher loses a fast cell's lines whenever the gateway falls behind, and an ipykernel on an
upstream whenever the upstream does; a local ipykernel one is told to keep them,
kernels/iopub_queue.py). A kernel built on jupyter_client's Session numbers every message it
sends, on any channel (`{session}_{pid}_{n}`): a run of numbers missing between two messages that
reached the gateway is what was dropped. A short run is what the kernel sent other clients
meanwhile, not a loss: their replies, and what a Jupyter server's nudge of a kernel takes for
itself (kernel_info on shell and control, replies and statuses, every half second while a
client connects under load); a kernel whose ids are not numbered so is not judged. An upstream
server's notice that it holds back output (its IOPub rate limit) is a loss too, of a size nobody
tells."""

from __future__ import annotations

import re

from loomgate.shared.wire import DroppedBy

SESSION_ID = re.compile(r"(?P<sender>.+_\d+)_(?P<n>\d+)")
# The longest run of numbers taken as other clients' (a dozen nudge rounds); a flood's drops,
# runs of hundreds, pass it.
OTHER_CLIENTS = 64


class MessageSequence:
    """The last numbered message seen of one kernel, and how many were missing before the
    messages seen since a cell last took its loss."""

    def __init__(self) -> None:
        self._last: tuple[str, int] | None = None
        # Missing since a cell last took them: a run found at a message of no cell (a reply, a
        # silent run's status) waits for the cell message or the missed end that follows it.
        self.dropped = 0
        self.held_back = False  # the latest message is an upstream's notice that it drops some
        self._notice_next = False

    def upstream_held_back(self) -> None:
        """Note that the next message is an upstream server's notice that it holds back the
        kernel's output (a stock Jupyter Server's IOPub rate limit): how much, nobody says."""
        self._notice_next = True

    def loss(self, kept: bool) -> tuple[int, DroppedBy] | None:
        """Take what was lost before the latest message, and who lost it (None: nothing known):
        the upstream's notice, or a run the kernel dropped (not judged when `kept`: a local
        ipykernel, which loomgate tells to keep every message; one on an upstream is not told,
        and drops when the upstream falls behind)."""
        if self.held_back:
            # What the kernel dropped meanwhile is part of what the upstream held back, whose
            # size is not told.
            self.held_back, self.dropped = False, 0
            return 0, "upstream"
        dropped, self.dropped = self.dropped, 0
        if dropped and not kept:
            return dropped, "kernel"
        return None

    def see(self, msg_id: str) -> int:
        """Note message `msg_id` (any channel's); return how many of the kernel's messages were
        dropped right before it (0 when none, or none can be told)."""
        self.held_back, self._notice_next = self._notice_next, False
        found = SESSION_ID.fullmatch(msg_id)
        if found is None:
            self._last = None
            return 0
        sender, number = found["sender"], int(found["n"])
        last, self._last = self._last, (sender, number)
        missing = number - last[1] - 1 if last is not None and last[0] == sender else 0
        missing = missing if missing > OTHER_CLIENTS else 0
        self.dropped += missing
        return missing
