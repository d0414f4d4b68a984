"""The server-sent event stream; with hold=true it also holds a conversation kernel."""

from __future__ import annotations

import asyncio
import contextlib

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.http1connection import HTTP1Connection
from tornado.iostream import StreamClosedError

from loomgate.gateway.errors import BadRequest
from loomgate.gateway.events import EventBus, Subscription, sse_frame
from loomgate.gateway.handlers.answers import Answer, answered
from loomgate.gateway.handlers.call import Call
from loomgate.gateway.handlers.http import LoomHandler
from loomgate.gateway.kernels.kernel import LoomKernel
from loomgate.shared.events import HelloEvent

KEEPALIVE_SECONDS = 5.0
KEEPALIVE = ": keepalive\n\n"
WATCHER_BATCH_SECONDS = 0.25  # how long a stream that holds nothing gathers events (the page
# draws at most this often anyway)
CLOSED = ""  # queued when the client goes away (no frame is empty)
STREAMED: Answer = (200, {})  # the answer of a stream that ran: it is written already


class EventsHandler(LoomHandler):
    """GET /api/loomgate/events[?kernel=ref&hold=true&client=label]: server-sent events.

    With `hold=true` the open connection holds the kernel: a conversation kernel starts its grace
    period only when its last holder's connection closes (a crashed translator included).
    """

    monitor_readable = True

    _subscription: Subscription | None = None
    _keepalive: asyncio.TimerHandle | None = None

    @property
    def events(self) -> EventBus:
        """Return the gateway's event bus."""
        events: EventBus = self.settings["loomgate_events"]
        return events

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """Stream events until the client goes away; a refusal before the stream is JSON."""
        answer = await answered(self.call("events", {}), self.stream)
        if answer is not STREAMED:
            self.reply(answer[1], answer[0])

    async def stream(self, call: Call) -> Answer:
        """Stream the events the call asks for, until the client goes away."""
        ref = call.text_arg("kernel")
        if ref:
            call.refuse_closed(ref)
        kernel: LoomKernel | None = call.registry.resolve(ref) if ref else None
        hold = call.bool_arg("hold", False)
        if hold and kernel is None:
            raise BadRequest("hold=true needs a kernel")
        client = call.client_arg()
        if isinstance(self.request.connection, HTTP1Connection):
            self.request.connection.stream.set_nodelay(True)
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        subscription = self._subscription = self.events.subscribe(kernel.id if kernel else None)
        self._arm_keepalive(subscription)
        if hold and kernel is not None:
            call.registry.holders.hold(kernel, client)
        try:
            hello = HelloEvent(event="hello", kernel=kernel.model() if kernel else None)
            self.write(sse_frame(hello))
            await self.flush()
            while True:
                frames = [await subscription.queue.get()]
                if not hold:
                    # A watcher (the monitor) gets what a cell sends in one write, a little
                    # later, so that it does not wake up on every message while the cell runs.
                    await asyncio.sleep(WATCHER_BATCH_SECONDS)
                while not subscription.queue.empty():  # what came meanwhile goes in one write
                    frames.append(subscription.queue.get_nowait())
                if CLOSED in frames:
                    break
                self.write("".join(frames))
                await self.flush()
        except StreamClosedError:
            pass
        finally:
            if self._keepalive is not None:
                self._keepalive.cancel()
            self.events.unsubscribe(subscription)
            if hold and kernel is not None:
                call.registry.holders.release(kernel, client)
            with contextlib.suppress(Exception):
                self.finish()
        return STREAMED

    def _arm_keepalive(self, subscription: Subscription) -> None:
        """Queue a comment each time the stream has been quiet for KEEPALIVE_SECONDS, so that
        proxies keep it open."""
        self._keepalive = asyncio.get_running_loop().call_later(
            KEEPALIVE_SECONDS, self._keep_alive, subscription
        )

    def _keep_alive(self, subscription: Subscription) -> None:
        if subscription.queue.empty():
            subscription.queue.put_nowait(KEEPALIVE)
        self._arm_keepalive(subscription)

    def on_connection_close(self) -> None:
        """End the stream loop so it releases its hold at once."""
        if self._subscription is not None:
            with contextlib.suppress(asyncio.QueueFull):  # then the next write fails instead
                self._subscription.queue.put_nowait(CLOSED)
