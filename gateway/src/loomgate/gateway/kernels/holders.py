"""Who holds each kernel (a translator's open connection), the grace period a conversation
kernel gets after its last holder lets go before it is stopped, and the cap on how many unheld
conversation kernels wait out their grace at once (beyond it, the longest idle is stopped)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from loomgate.gateway.events import EventBus, Listener, Published
from loomgate.gateway.kernels.kernel import LoomKernel
from loomgate.shared.wire import RUNNING_STATES

UNNAMED = "a client that gave no name"
DEFAULT_IDLE_CAP = 3  # unheld, unnamed conversation kernels kept through their grace at once


@dataclass
class Waiting:
    """An unheld conversation kernel in its grace period."""

    kernel: LoomKernel
    since: float  # when it was left alone (its last holder let go, or it was made unheld)
    timer: asyncio.TimerHandle  # the end of its grace
    capped: bool  # counted against the cap: its last holder let go (it was held once)
    due: bool = False  # its grace is over: it is stopped once its running cell ends


class Holders:
    """Counts holders per kernel and stops a conversation kernel left alone past the grace, or
    sooner when more than `idle_cap` unnamed, idle ones are left alone (the longest idle first;
    never a held kernel, one running a cell, or one with a name)."""

    def __init__(
        self,
        events: EventBus,
        grace_seconds: float,
        log: logging.Logger,
        *,
        is_live: Callable[[LoomKernel], bool],
        stop: Callable[[LoomKernel], Awaitable[None]],
        idle_cap: int = DEFAULT_IDLE_CAP,
    ) -> None:
        self.events = events
        self.grace_seconds = grace_seconds
        self.idle_cap = idle_cap
        self.log = log
        self._is_live = is_live
        self._stop = stop
        self._waiting: dict[str, Waiting] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        # A cell's end on a waiting kernel may make it (or the cap's next one) stoppable.
        events.listen(Listener(lambda kernel_id: kernel_id in self._waiting, self._on_event))

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
            self._begin_grace(kernel, capped=True)
        self.events.holders(kernel.id, kernel.holders)

    def start_grace(self, kernel: LoomKernel) -> None:
        """Stop `kernel`, never held yet (just created, or taken back from an earlier gateway),
        once it has had no holder for the grace period (and no running cell); listeners learn
        when (the kernel's `stops_at`) from a `holders` event."""
        self._begin_grace(kernel, capped=False)
        self.events.holders(kernel.id, kernel.holders)

    def _begin_grace(self, kernel: LoomKernel, *, capped: bool) -> None:
        """Start the grace period of `kernel`; `capped`: its last holder let go, so it counts
        against the cap of idle unheld conversation kernels (one never held yet is about to be
        held by its translator, and only has its grace)."""
        self.forget(kernel.id)
        now = time.time()
        timer = asyncio.get_running_loop().call_later(
            self.grace_seconds, self._grace_over, kernel.id
        )
        self._waiting[kernel.id] = Waiting(kernel, now, timer, capped)
        kernel.stops_at = now + self.grace_seconds
        self._apply_cap()

    def forget(self, kernel_id: str) -> None:
        """Cancel the grace period of `kernel_id`, if one runs."""
        waiting = self._waiting.pop(kernel_id, None)
        if waiting is not None:
            waiting.timer.cancel()
            waiting.kernel.stops_at = None

    def forget_all(self) -> None:
        """Cancel every grace period (the gateway is leaving its kernels running)."""
        for kernel_id in list(self._waiting):
            self.forget(kernel_id)

    def _grace_over(self, kernel_id: str) -> None:
        waiting = self._waiting.get(kernel_id)
        if waiting is None:
            return
        waiting.due = True
        if waiting.kernel.executions.current is None:
            self._stop_now(waiting, f"no holder for {self.grace_seconds:.0f} s")

    def _apply_cap(self) -> None:
        """Stop the longest-idle unheld conversation kernels beyond the cap (one running a cell
        does not count until it ends: then the cap is applied again)."""
        idle = sorted(
            (
                waiting
                for waiting in self._waiting.values()
                if waiting.capped
                and waiting.kernel.name is None
                and waiting.kernel.executions.current is None
            ),
            key=idle_since,
        )
        for waiting in idle[: max(0, len(idle) - self.idle_cap)]:
            self._stop_now(
                waiting,
                f"{len(idle)} idle conversation kernels nobody holds, more than "
                f"--idle-conversations {self.idle_cap}, and it was idle longest",
            )

    def _on_event(self, event: Published) -> None:
        if event["event"] != "execution" or event["execution"]["state"] in RUNNING_STATES:
            return
        # Once the tracker has let go of the cell (it publishes the end just before).
        asyncio.get_running_loop().call_soon(self._cell_ended, event["kernel_id"])

    def _cell_ended(self, kernel_id: str) -> None:
        waiting = self._waiting.get(kernel_id)
        if waiting is None or waiting.kernel.executions.current is not None:
            return
        if waiting.due:
            self._stop_now(waiting, f"no holder for {self.grace_seconds:.0f} s")
        else:
            self._apply_cap()

    def _stop_now(self, waiting: Waiting, why: str) -> None:
        """Stop the waiting kernel now (its grace is cancelled)."""
        kernel = waiting.kernel
        self.forget(kernel.id)
        if kernel.holders or not self._is_live(kernel):
            return
        self.log.info("Stopping conversation kernel %s: %s", kernel.id, why)
        task = asyncio.get_running_loop().create_task(self._stop_unheld(kernel, waiting.capped))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _stop_unheld(self, kernel: LoomKernel, capped: bool) -> None:
        if kernel.holders or not self._is_live(kernel):
            return  # held again, or stopped meanwhile
        if kernel.executions.current is not None:  # a cell came in meanwhile: it waits again
            self._begin_grace(kernel, capped=capped)
            return
        try:
            await self._stop(kernel)
        except Exception:
            self.log.exception("Could not stop conversation kernel %s", kernel.id)


def idle_since(waiting: Waiting) -> float:
    """Return since when a waiting kernel has been idle: left alone, or its last activity."""
    return max(waiting.since, waiting.kernel.executions.last_activity)
