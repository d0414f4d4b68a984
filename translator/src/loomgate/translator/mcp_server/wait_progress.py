"""A tool call's progress notifications while it waits on a cell: one each second beside the one
long poll that waits, worded from what the kernel's event stream says it runs.

A conversation kernel's hold carries that stream already. Any other kernel gets a stream of its
own for the call, opened once the wait has lasted half a second (a quick cell never pays for
it): its notifications name the cell from then on, and the lines printed after that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator
from types import TracebackType

from mcp.server.mcpserver import Context

from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.kernel_activity import KernelActivity
from loomgate.translator.presentation import progress_message

log = logging.getLogger(__name__)

TICK_SECONDS = 1.0  # a progress notification for each second of a wait
STREAM_AFTER = TICK_SECONDS / 2  # when a kernel that is not held gets an event stream of its own


class WaitProgress:
    """The progress of one tool call's waits on kernel `ref`, counted from the call's start.

    Its ticks are timers on the event loop, not a task: a wait that ends before the first one
    (any quick cell) costs a timer set and cancelled, no task to start and to wind down.
    """

    def __init__(
        self, ctx: Context, client: GatewayClient, ref: str, held: KernelActivity | None
    ) -> None:
        self.ctx = ctx
        self.client = client
        self.ref = ref
        self.started = time.monotonic()
        self.activity = held if held is not None else KernelActivity()
        self._needs_stream = held is None
        self._stream: asyncio.Task[None] | None = None
        self._number: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._reports: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> WaitProgress:
        """Return this progress; its own event stream (if any) is closed on exit."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the event stream opened for this call, if one was."""
        task, self._stream = self._stream, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    @contextlib.asynccontextmanager
    async def beside(self, number: int | None) -> AsyncIterator[None]:
        """Report progress each second while the body (one long poll) runs: on execution
        `number`, or (None) on the one the kernel runs."""
        self._number = number
        self._schedule()
        try:
            yield
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._reports:  # a notification under way goes out before the result
                await asyncio.wait(self._reports)

    def _schedule(self) -> None:
        """Set the timer of the next step: opening the kernel's own stream, or the next tick."""
        loop = asyncio.get_running_loop()
        waited = time.monotonic() - self.started
        if self._needs_stream:
            self._timer = loop.call_later(max(0.0, STREAM_AFTER - waited), self._open_stream)
            return
        tick = (math.floor(waited / TICK_SECONDS) + 1) * TICK_SECONDS
        self._timer = loop.call_later(tick - waited, self._tick, tick)

    def _open_stream(self) -> None:
        self._needs_stream = False
        self._stream = asyncio.ensure_future(self._follow_stream())
        self._schedule()

    def _tick(self, waited: float) -> None:
        report = asyncio.ensure_future(self._report(waited))
        self._reports.add(report)
        report.add_done_callback(self._reports.discard)
        self._schedule()

    async def _report(self, waited: float) -> None:
        running = self._number if self._number is not None else self.activity.current
        last_line = self.activity.last_line(running) if running is not None else ""
        try:
            await self.ctx.report_progress(
                waited, None, progress_message(running, waited, last_line)
            )
        except Exception as e:  # a host that dropped the progress token must not fail the call
            log.debug("progress not delivered: %s", e)

    async def _follow_stream(self) -> None:
        try:
            async with self.client.event_stream(self.ref, hold=False) as events:
                async for event in events:
                    self.activity(event)
        except GatewayError as e:  # the notifications go on, naming what they know
            log.debug("no event stream on %s for progress: %s", self.ref, e)
