"""Output a kernel publishes for a cell after the cell's `idle`: Deno sends most of a long cell's
console output after it (its console drains on its own, 1-2 ms a line). A kernel known to do so,
or seen doing so once (noted in kernel.json), has each cell end only once its output has been
quiet for QUIET seconds after its idle (RELAYED_QUIET on an upstream's kernel; at most
SETTLE_LIMIT), so that the record, and whoever waits on it, has all of it; what comes later still
is appended to the record it belongs to."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from loomgate.gateway.kernels.kernel_kind import KernelKind
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore

QUIET = 0.1  # seconds without output after which a settling cell has ended
# An upstream's kernel: each message passes the upstream server and its websocket, either of which
# stalls for longer than QUIET on a loaded machine.
RELAYED_QUIET = 0.5
SETTLE_LIMIT = 30.0  # seconds after its idle at which a cell ends however its output flows
KNOWN_LATE = frozenset({"Deno kernel"})  # implementations that publish after idle


class LateOutput:
    """Which cells of one kernel wait for output after their idle, and until when."""

    def __init__(self, store: RecordStore, log: logging.Logger) -> None:
        self.store = store
        self.log = log
        self._settling: dict[int, tuple[float, asyncio.TimerHandle]] = {}  # number: idle, timer
        self.quiet = QUIET  # RELAYED_QUIET for an upstream's kernel

    def expected(self, kind: KernelKind) -> bool:
        """Return whether this kernel's cells wait for output after their idle."""
        return kind.implementation in KNOWN_LATE or bool(self.store.meta.get("late_output"))

    def settling(self, record: ExecutionRecord) -> bool:
        """Return whether `record` has had its idle and waits for the rest of its output."""
        return record.number in self._settling

    def settle(self, record: ExecutionRecord, end: Callable[[], None], *, relayed: bool) -> None:
        """Call `end` once `record`'s output has been quiet for a while from now, its idle
        (longer when an upstream relays the kernel's messages)."""
        self.quiet = RELAYED_QUIET if relayed else QUIET
        self._schedule(record, time.monotonic(), end)

    def output(self, record: ExecutionRecord, kind: KernelKind, end: Callable[[], None]) -> None:
        """Note output of `record`: a settling cell waits `quiet` seconds more (within its limit);
        output of one already ended shows this kernel publishes late (noted for good), unless
        an IPython shell runs it, whose late output is a subprocess's or a thread's now and
        then, not its way."""
        settling = self._settling.get(record.number)
        if settling is not None:
            idle, timer = settling
            timer.cancel()
            self._schedule(record, idle, end)
        elif record.final and not kind.ipython and not self.store.meta.get("late_output"):
            self.store.meta["late_output"] = True
            self.store.save()
            self.log.info(
                "Kernel %s publishes output after a cell's end: its cells now end once their "
                "output is quiet",
                self.store.kernel_id,
            )

    def _schedule(self, record: ExecutionRecord, idle: float, end: Callable[[], None]) -> None:
        delay = min(self.quiet, max(0.0, idle + SETTLE_LIMIT - time.monotonic()))
        timer = asyncio.get_running_loop().call_later(delay, self._ended, record, end)
        self._settling[record.number] = (idle, timer)

    def _ended(self, record: ExecutionRecord, end: Callable[[], None]) -> None:
        self._settling.pop(record.number, None)
        if not record.final:
            end()

    def forget(self, record: ExecutionRecord) -> None:
        """Stop waiting on `record` (it ended otherwise: killed, died, lost)."""
        settling = self._settling.pop(record.number, None)
        if settling is not None:
            settling[1].cancel()
