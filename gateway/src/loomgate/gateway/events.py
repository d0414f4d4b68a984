"""The live event bus: kernel and execution lifecycle plus output progress, for SSE listeners."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

QUEUE_SIZE = 1000


@dataclass
class Subscription:
    """One listener's queue; `kernel_id` None means every kernel."""

    kernel_id: str | None
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    dropped: int = 0


class EventBus:
    """Fan-out of events to subscribers; a slow subscriber loses events, never slows the gateway."""

    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []
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

    def has_subscribers(self, kernel_id: str) -> bool:
        """Return whether anyone listens to events of `kernel_id`."""
        return any(s.kernel_id in (None, kernel_id) for s in self._subscriptions)

    def publish(self, event: str, kernel_id: str, data: dict[str, Any]) -> None:
        """Queue `event` for every subscriber interested in `kernel_id`."""
        if not self._subscriptions:
            return
        message = {
            "id": next(self._ids),
            "event": event,
            "kernel_id": kernel_id,
            "time": time.time(),
            **data,
        }
        for subscription in self._subscriptions:
            if subscription.kernel_id not in (None, kernel_id):
                continue
            try:
                subscription.queue.put_nowait(message)
            except asyncio.QueueFull:
                subscription.dropped += 1
