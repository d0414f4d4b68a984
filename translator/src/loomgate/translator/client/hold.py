"""A kernel hold: the event stream that keeps a conversation kernel from its grace period.

Open one with `async with Hold(client, kernel_id)` or `await Hold(...).open()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING

from loomgate.shared.events import Event
from loomgate.translator.client.errors import (
    Ambiguous,
    AuthFailed,
    BadRequest,
    GatewayError,
    NotFound,
    ProtocolError,
    Timeout,
    Unavailable,
)

if TYPE_CHECKING:
    from loomgate.translator.client.session import GatewaySession

log = logging.getLogger(__name__)

HOLD_BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0)
HOLD_OPEN_TIMEOUT = 30.0
# Refusals after which reconnecting a hold cannot help.
# What reconnecting cannot mend: the hold ends.
PERMANENT_HOLD_ERRORS = (NotFound, BadRequest, Ambiguous, AuthFailed, ProtocolError)

EventCallback = Callable[[Event], Awaitable[None] | None]


class Hold:
    """A `hold=true` event stream on one kernel, kept open (reconnecting) until closed."""

    def __init__(
        self, client: GatewaySession, kernel_id: str, on_event: EventCallback | None = None
    ) -> None:
        self.client = client
        self.kernel_id = kernel_id
        self.on_event = on_event
        self._task: asyncio.Task[None] | None = None
        self._first: asyncio.Future[None] | None = None
        self._closing = False

    async def open(self, timeout: float = HOLD_OPEN_TIMEOUT) -> Hold:
        """Return this hold once its first connection is open (GatewayError if it cannot be)."""
        if self._task is not None:
            return self
        loop = asyncio.get_running_loop()
        self._first = loop.create_future()
        self._task = loop.create_task(self._run(), name=f"loomgate hold {self.kernel_id}")
        self.client.track(self, open=True)
        try:
            await asyncio.wait_for(asyncio.shield(self._first), timeout)
        except asyncio.TimeoutError:
            await self.aclose()
            raise Timeout(
                f"{self.client.where} did not open the event stream within {timeout:g} s"
            ) from None
        except BaseException:
            await self.aclose()
            raise
        return self

    async def aclose(self) -> None:
        """Close the event stream (releasing the hold) and stop reconnecting; return nothing."""
        self._closing = True
        self.client.track(self, open=False)
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> Hold:
        """Return this hold, opened."""
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the hold."""
        await self.aclose()

    async def _run(self) -> None:
        failures = 0
        while not self._closing:
            try:
                async with self.client.event_stream(self.kernel_id, hold=True) as events:
                    async for event in events:
                        if event["event"] == "hello":
                            failures = 0
                            if self._first is not None and not self._first.done():
                                self._first.set_result(None)
                        await self._deliver(event)
            except GatewayError as e:
                if self._first is not None and not self._first.done():
                    self._first.set_exception(e)
                    return
                gone = isinstance(e, Unavailable) and "kernel_id" in e.details
                if isinstance(e, PERMANENT_HOLD_ERRORS) or gone:
                    log.warning("hold on kernel %s ended: %s", self.kernel_id, e)
                    return
                log.info("hold on kernel %s lost (%s); reconnecting", self.kernel_id, e)
            delay = HOLD_BACKOFF[min(failures, len(HOLD_BACKOFF) - 1)]
            failures += 1
            await asyncio.sleep(delay)

    async def _deliver(self, event: Event) -> None:
        if self.on_event is None:
            return
        try:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("the hold's event callback failed on a %r event", event["event"])
