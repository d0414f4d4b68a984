"""The server-sent event stream; with hold=true it also holds a conversation kernel."""

from __future__ import annotations

import asyncio
import contextlib
import json

from tornado.http1connection import HTTP1Connection
from tornado.iostream import StreamClosedError

from loomgate.gateway.errors import BadRequest
from loomgate.gateway.handlers.base import LoomHandler, endpoint
from loomgate.gateway.kernels.kernel import LoomKernel
from loomgate.shared.events import Event, HelloEvent

KEEPALIVE_SECONDS = 5.0


class EventsHandler(LoomHandler):
    """GET /api/loomgate/events[?kernel=ref&hold=true&client=label]: server-sent events.

    With `hold=true` the open connection holds the kernel: a conversation kernel starts its grace
    period only when its last holder's connection closes (a crashed translator included).
    """

    monitor_readable = True  # its GET (the monitor credential may read it)

    _closed: asyncio.Event

    @endpoint
    async def get(self) -> None:
        """Stream events until the client goes away."""
        ref = self.get_query_argument("kernel", None)
        kernel: LoomKernel | None = self.registry.resolve(ref) if ref else None
        hold = self.bool_arg("hold", False)
        if hold and kernel is None:
            raise BadRequest("hold=true needs a kernel")
        client = self.client_arg()
        self._closed = asyncio.Event()
        if isinstance(self.request.connection, HTTP1Connection):
            self.request.connection.stream.set_nodelay(True)
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        subscription = self.events.subscribe(kernel.id if kernel else None)
        if hold and kernel is not None:
            self.registry.holders.hold(kernel, client)
        try:
            hello = HelloEvent(event="hello", kernel=kernel.model() if kernel else None)
            await self._send("hello", hello)
            while not self._closed.is_set():
                getter = asyncio.ensure_future(subscription.queue.get())
                closed = asyncio.ensure_future(self._closed.wait())
                done, _ = await asyncio.wait(
                    {getter, closed}, timeout=KEEPALIVE_SECONDS, return_when="FIRST_COMPLETED"
                )
                for future in (getter, closed):
                    if future not in done:
                        future.cancel()
                if getter in done:
                    message = getter.result()
                    await self._send(message["event"], message)
                elif not done:
                    self.write(": keepalive\n\n")
                    await self.flush()
        except StreamClosedError:
            pass
        finally:
            self.events.unsubscribe(subscription)
            if hold and kernel is not None:
                self.registry.holders.release(kernel, client)
            with contextlib.suppress(Exception):
                self.finish()

    async def _send(self, event: str, data: Event) -> None:
        self.write(f"event: {event}\ndata: {json.dumps(data)}\n\n")
        await self.flush()

    def on_connection_close(self) -> None:
        """Wake the stream loop so it releases its hold at once."""
        self._closed.set()
