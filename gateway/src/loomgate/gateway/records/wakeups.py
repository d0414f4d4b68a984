"""The long-polls waiting on one record: woken together by its next change, or by their time."""

from __future__ import annotations

import asyncio


class Wakeups:
    """Waiters of one record; `wake` resumes them all in the order they began to wait."""

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []

    def wake(self) -> None:
        """Resume every waiter (each runs after the callbacks already queued)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _resolve(waiter)

    async def next(self, timeout: float) -> None:
        """Return at the next `wake`, or after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        # A plain timer rather than asyncio.wait_for: its extra callbacks (Python < 3.12) would
        # let the work a waker queues behind the wake-up (closing files, saving) run first.
        timer = loop.call_later(timeout, _resolve, waiter)
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    """Set `waiter` done unless it is already."""
    if not waiter.done():
        waiter.set_result(None)
