"""Who holds each kernel (a translator's open connection), and the grace period a conversation
kernel gets after its last holder lets go before it is stopped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from loomgate.gateway.events import EventBus
from loomgate.gateway.kernels.kernel import LoomKernel

UNNAMED = "a client that gave no name"


class Holders:
    """Counts holders per kernel and stops a conversation kernel left alone past the grace."""

    def __init__(
        self,
        events: EventBus,
        grace_seconds: float,
        log: logging.Logger,
        *,
        is_live: Callable[[LoomKernel], bool],
        stop: Callable[[LoomKernel], Awaitable[None]],
    ) -> None:
        self.events = events
        self.grace_seconds = grace_seconds
        self.log = log
        self._is_live = is_live
        self._stop = stop
        self._grace_tasks: dict[str, asyncio.Task[None]] = {}

    def hold(self, kernel: LoomKernel, client: str | None = None) -> None:
        """Count one more open translator connection holding `kernel` (`client`: who it is)."""
        kernel.held_by.append(client or UNNAMED)
        self.forget(kernel.id)
        self.events.holders(kernel.id, kernel.holders)

    def release(self, kernel: LoomKernel, client: str | None = None) -> None:
        """Count one connection fewer; a conversation kernel left alone starts its grace period."""
        if (client or UNNAMED) in kernel.held_by:
            kernel.held_by.remove(client or UNNAMED)
        if kernel.holders == 0 and kernel.lifetime == "conversation" and self._is_live(kernel):
            self.start_grace(kernel)
        self.events.holders(kernel.id, kernel.holders)

    def start_grace(self, kernel: LoomKernel) -> None:
        """Stop `kernel` once it has had no holder for the grace period (and no running cell)."""
        self.forget(kernel.id)
        self._grace_tasks[kernel.id] = asyncio.get_running_loop().create_task(
            self._release_after_grace(kernel)
        )

    def forget(self, kernel_id: str) -> None:
        """Cancel the grace period of `kernel_id`, if one runs."""
        task = self._grace_tasks.pop(kernel_id, None)
        if task is not None:
            task.cancel()

    def forget_all(self) -> None:
        """Cancel every grace period (the gateway is leaving its kernels running)."""
        for kernel_id in list(self._grace_tasks):
            self.forget(kernel_id)

    async def _release_after_grace(self, kernel: LoomKernel) -> None:
        await asyncio.sleep(self.grace_seconds)
        while kernel.executions.current is not None and kernel.holders == 0:
            await kernel.executions.current.wait(timeout=3600)
        if kernel.holders == 0 and self._is_live(kernel):
            self._grace_tasks.pop(kernel.id, None)
            self.log.info(
                "Stopping conversation kernel %s: no holder for %.0f s",
                kernel.id,
                self.grace_seconds,
            )
            await self._stop(kernel)
