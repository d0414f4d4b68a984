"""The live event bus: kernel and execution lifecycle plus output progress, for SSE listeners."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loomgate.shared.events import (
    Event,
    ExecutionEvent,
    HoldersEvent,
    KernelEvent,
    KernelPhase,
    OutputEvent,
    ToolCall,
    ToolCallEvent,
)
from loomgate.shared.wire import Execution, Kernel

QUEUE_SIZE = 1000
Published = KernelEvent | HoldersEvent | ExecutionEvent | OutputEvent | ToolCallEvent


@dataclass(frozen=True)
class Listener:
    """An in-process listener: called with each event of the kernels `wants` accepts (asked
    again at every event, so that kernels it has no use for cost nothing)."""

    wants: Callable[[str], bool]
    callback: Callable[[Published], None]


@dataclass
class Subscription:
    """One listener's queue of SSE frames (each event serialized once for all listeners);
    `kernel_id` None means every kernel."""

    kernel_id: str | None
    queue: asyncio.Queue[str] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    dropped: int = 0


class EventBus:
    """Fan-out of events to subscribers; a slow subscriber loses events, never slows the gateway."""

    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []
        self._listeners: list[Listener] = []
        self._ids = itertools.count(1)

    def subscribe(self, kernel_id: str | None) -> Subscription:
        """Return a new subscription to events of `kernel_id` (or of all kernels)."""
        subscription = Subscription(kernel_id)
        self._subscriptions.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop delivering to `subscription`."""
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)

    def listen(self, listener: Listener) -> None:
        """Call `listener` with the events of the kernels it wants, as they are published."""
        self._listeners.append(listener)

    def has_subscribers(self, kernel_id: str) -> bool:
        """Return whether anyone listens to events of `kernel_id`."""
        return any(s.kernel_id in (None, kernel_id) for s in self._subscriptions) or any(
            listener.wants(kernel_id) for listener in self._listeners
        )

    def kernel(
        self, kernel_id: str, phase: KernelPhase, kernel: Kernel, reason: str | None = None
    ) -> None:
        """Publish that a kernel is ready, restarting, dead (with `reason`) or stopped (its
        state is `gone` from then on: the event's word for it is older), or that its
        checkpoints changed."""
        if self._subscriptions or self._listeners:
            event = KernelEvent(
                id=next(self._ids),
                event="kernel",
                kernel_id=kernel_id,
                time=time.time(),
                phase=phase,
                kernel=kernel,
            )
            if reason is not None:
                event["reason"] = reason
            self._deliver(event)

    def holders(self, kernel_id: str, holders: int) -> None:
        """Publish how many holders a kernel has now."""
        if self._subscriptions or self._listeners:
            self._deliver(
                HoldersEvent(
                    id=next(self._ids),
                    event="holders",
                    kernel_id=kernel_id,
                    time=time.time(),
                    holders=holders,
                )
            )

    def execution(self, kernel_id: str, execution: Execution) -> None:
        """Publish an execution's new state."""
        if self._subscriptions or self._listeners:
            self._deliver(
                ExecutionEvent(
                    id=next(self._ids),
                    event="execution",
                    kernel_id=kernel_id,
                    time=time.time(),
                    execution=execution,
                )
            )

    def output(self, kernel_id: str, number: int, lines: int, last_line: str) -> None:
        """Publish that execution `number` has `lines` lines in `combined`, ending `last_line`."""
        if self._subscriptions or self._listeners:
            self._deliver(
                OutputEvent(
                    id=next(self._ids),
                    event="output",
                    kernel_id=kernel_id,
                    time=time.time(),
                    number=number,
                    lines=lines,
                    last_line=last_line,
                )
            )

    def tool_call(self, tool_call: ToolCall) -> None:
        """Publish a tool call a translator reported, to listeners of all kernels only (a
        translator's own hold on its kernel has no use for it)."""
        if self._subscriptions or self._listeners:
            self._deliver(
                ToolCallEvent(
                    id=next(self._ids),
                    event="tool_call",
                    kernel_id=tool_call["kernel_id"],
                    time=time.time(),
                    tool_call=tool_call,
                ),
                everyone_only=True,
            )

    def _deliver(self, event: Published, *, everyone_only: bool = False) -> None:
        """Queue `event` for every subscriber interested in its kernel (with `everyone_only`,
        for the subscribers of all kernels alone), and call the listeners that want it."""
        kernel_id = event["kernel_id"]
        if not everyone_only and kernel_id is not None:
            for listener in self._listeners:
                if listener.wants(kernel_id):
                    listener.callback(event)
        frame: str | None = None
        wanted = (None,) if everyone_only else (None, event["kernel_id"])
        for subscription in self._subscriptions:
            if subscription.kernel_id not in wanted:
                continue
            if frame is None:
                frame = sse_frame(event)
            try:
                subscription.queue.put_nowait(frame)
            except asyncio.QueueFull:
                subscription.dropped += 1


def sse_frame(event: Event) -> str:
    """Return `event` as one server-sent event."""
    return f"event: {event['event']}\ndata: {json.dumps(event)}\n\n"
