"""jupyter_server's gateway kernel managers with loomgate's hooks: kernels on the upstream,
records here."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from jupyter_server.gateway.connections import GatewayWebSocketConnection
from jupyter_server.gateway.gateway_client import GatewayClient, gateway_request
from jupyter_server.gateway.managers import (
    GatewayKernelManager,
    GatewayKernelSpecManager,
    GatewayMappingKernelManager,
)
from tornado import web
from tornado.escape import json_decode
from tornado.httpclient import HTTPClientError
from traitlets import Unicode

from loomgate.gateway.errors import NotFound, Refusal
from loomgate.gateway.jupyter_internals import async_override
from loomgate.gateway.kernels.kernel_channels import Handler, KernelChannels, Message
from loomgate.gateway.kernels.manager import note_activity
from loomgate.gateway.kernels.manager_protocol import ManagedKernel
from loomgate.gateway.kernels.start_options import KernelIntent
from loomgate.gateway.upstream.failures import describe
from loomgate.gateway.upstream.websocket_channels import WebsocketChannels

if TYPE_CHECKING:
    from loomgate.gateway.kernels.registry import KernelRegistry

T = TypeVar("T")
RECONNECT_FIRST_DELAY = 0.5
RECONNECT_MAX_DELAY = 10.0
GONE_UPSTREAM = (
    "the kernel is no longer on the upstream (stopped there by someone else, culled, or lost "
    "when the upstream restarted)"
)
DEAD_UPSTREAM = "the upstream could not restart the kernel after it died"
DIED_UPSTREAM = "the kernel died on the upstream"
GIVEN_UP = "the kernel died as it started, and the upstream gave it up after its own restarts"
GIVEN_UP_CHECK = 0.5  # how often a start looks whether the upstream still has the kernel
# How often the upstream's kernel list is checked for kernels someone else stopped or culled
# (a kernel stopped there sends no message a websocket is sure to get).
WATCH_SECONDS = 5.0
GONE_CHECKS = 20  # after a kernel said it is shutting down: this many looks, 0.25 s apart
GONE_CHECK_INTERVAL = 0.25


def upstream_url() -> str:
    """Return the upstream's base URL, as configured (GatewayClient.url)."""
    return str(GatewayClient.instance().url or "")


class UpstreamMappingKernelManager(GatewayMappingKernelManager):
    """The map of the upstream's kernels this gateway records, making UpstreamKernelManagers."""

    kernel_manager_class = Unicode(
        "loomgate.gateway.upstream.manager.UpstreamKernelManager", config=True
    )
    token_env = Unicode(
        "", config=True, help="The variable the upstream's token was read from (for errors)."
    )
    loom_registry: KernelRegistry

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._watching: asyncio.Task[None] | None = None

    @property
    def upstream(self) -> str:
        """Return the upstream's URL (where the kernels run)."""
        return upstream_url()

    def failure(self, error: BaseException) -> Refusal:
        """Return the refusal for a failed request to the upstream."""
        return describe(error, upstream_url(), self.token_env or None)

    async def asking(self, work: Awaitable[T]) -> T:
        """Return what `work` (a request to the upstream) returns; a failure is an HTTP error
        whose message says what went wrong, caused by the Refusal the registry reports."""
        try:
            return await work
        except (web.HTTPError, HTTPClientError, OSError) as e:
            refusal = self.failure(e)
            raise web.HTTPError(refusal.status, refusal.message) from refusal

    @async_override
    async def start_kernel(
        self, *, kernel_id: str | None = None, path: str | None = None, **kwargs: Any
    ) -> str:
        """Start a kernel on the upstream (or attach to its kernel `kernel_id`) and record it."""
        intent: KernelIntent = kwargs.pop("loom_intent", None) or KernelIntent()
        if kernel_id is not None and kernel_id in self._kernels:
            return kernel_id  # attached already
        started = await self.asking(super().start_kernel(kernel_id=kernel_id, path=path, **kwargs))
        km = cast(UpstreamKernelManager, self.get_kernel(str(started)))
        if km.kernel is None:  # asked to attach to a kernel the upstream does not have
            self.remove_kernel(str(started))
            refusal = NotFound(f"the upstream at {self.upstream} has no kernel {started}")
            raise web.HTTPError(404, refusal.message) from refusal
        # jupyter_server's remote kernel manager keeps its default name; the upstream's model
        # names the spec the kernel runs.
        km.kernel_name = str(km.kernel.get("name") or km.kernel_name)
        given_up = asyncio.ensure_future(km.fail_if_given_up())
        try:
            await self.loom_registry.process_started(km, intent)
        except Exception:
            self.remove_kernel(str(started))
            with contextlib.suppress(Exception):  # not left running there (if it still is)
                await self.asking(GatewayKernelManager.shutdown_kernel(km, now=True))
            raise
        finally:
            given_up.cancel()
        self.watch()
        return str(started)

    async def kernel_specs(self) -> list[str]:
        """Return the names of the upstream's kernel specs (Refusal if it cannot say)."""
        try:
            specs = cast(GatewayKernelSpecManager, self.kernel_spec_manager)
            return sorted(await specs.get_all_specs())
        except (web.HTTPError, OSError) as e:
            raise self.failure(e) from None

    def watch(self) -> None:
        """Start checking, every WATCH_SECONDS, that the upstream still runs our kernels."""
        if self._watching is None:
            self._watching = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            kms = [kernel.km for kernel in self.loom_registry.live.values()]
            live = [km for km in kms if isinstance(km, UpstreamKernelManager)]
            if not live:
                continue
            try:
                running = {str(model["id"]) for model in await self.list_upstream()}
            except web.HTTPError as e:
                if e.status_code != 403:
                    continue  # unreachable: each kernel's websocket reconnects, or finds it gone
                running = set()  # listing refused (Kernel Gateway's default): ask one by one
            for km in live:
                if str(km.kernel_id) not in running:
                    await km.check_gone(looks=1)

    async def list_upstream(self) -> list[dict[str, Any]]:
        """Return the models of every kernel the upstream runs (ours and anyone's)."""
        response = await self.asking(gateway_request(self.kernels_url, method="GET"))
        return cast("list[dict[str, Any]]", json_decode(response.body))

    def note_activity(self, km: ManagedKernel, msg: Message) -> None:
        """Update the kernel's activity markers from one of its IOPub messages."""
        note_activity(self, km, msg)

    def connections(self, kernel_id: str) -> int:
        """Return how many websockets other than loomgate's own are open on the kernel."""
        km = self._kernels.get(kernel_id)
        model = km.kernel if km is not None else None
        return max(0, int((model or {}).get("connections", 1)) - 1)


class UpstreamKernelManager(GatewayKernelManager):
    """One kernel on the upstream: REST for its life, loomgate's own websocket for its records.

    The upstream's restarter restarts a kernel that dies there; its websocket says so (status
    `restarting`, then `dead` if that failed), and this calls the registry's callbacks as a
    local restarter would. A websocket that drops is opened again with backoff.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ending = ""  # how the kernel ended, once it has
        self.session_id = uuid.uuid4().hex  # kept across reconnects: the upstream replays to it
        self._callbacks: dict[str, list[Callable[[], None]]] = {"restart": [], "dead": []}
        self._tasks: set[asyncio.Task[None]] = set()
        self._channels: WebsocketChannels | None = None  # the latest opened

    @property
    def ready(self) -> asyncio.Future[None]:
        """Return a finished future: the upstream's start and restart calls return only once
        they are done (jupyter_client's own `ready` is never set for a remote kernel)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    @property
    def mapping(self) -> UpstreamMappingKernelManager:
        """Return the kernel map this kernel belongs to."""
        return cast(UpstreamMappingKernelManager, self.parent)

    @property
    def registry(self) -> KernelRegistry:
        """Return the gateway's kernel registry."""
        return self.mapping.loom_registry

    def add_restart_callback(self, callback: Callable[[], None], event: str = "restart") -> None:
        """Call `callback` when the upstream restarts the kernel (`restart`) or gives up on it."""
        self._callbacks[event].append(callback)

    def remove_restart_callback(self, callback: Callable[[], None], event: str = "restart") -> None:
        """Stop calling `callback`."""
        if callback in self._callbacks[event]:
            self._callbacks[event].remove(callback)

    def _fire(self, event: str) -> None:
        for callback in list(self._callbacks[event]):
            callback()

    async def fail_if_given_up(self) -> None:
        """Fail the start in progress once the upstream no longer has the kernel: it died as it
        started and the upstream gave it up after its own restarts (its websocket never opens,
        so nothing else would say so before the upstream's request timeout)."""
        while True:
            await asyncio.sleep(GIVEN_UP_CHECK)
            with contextlib.suppress(web.HTTPError):
                if await self.mapping.asking(self.refresh_model()) is None:
                    if self._channels is not None:
                        self._channels.fail_start(GIVEN_UP)
                    return

    def open_channels(self, *, on_iopub: Handler, on_stdin: Handler) -> KernelChannels:
        """Return loomgate's own websocket to the kernel on the upstream."""
        self._channels = WebsocketChannels(
            str(self.kernel_id),
            self.session,
            self.session_id,
            on_iopub=on_iopub,
            on_stdin=on_stdin,
            on_server_state=self._server_state,
            on_lost=self._lost,
            describe=lambda error: self.mapping.failure(error).message,
        )
        return self._channels

    @async_override
    async def restart_kernel(self, **kw: Any) -> None:
        """Restart the kernel on the upstream; its records go on (numbering continues)."""
        self.registry.process_stopping(self, restart=True)
        try:
            await self.mapping.asking(super().restart_kernel(**kw))
        except web.HTTPError:
            self._spawn(self._reconnect())  # not restarted: follow it as it is
            raise
        await self.registry.process_started(self)

    @async_override
    async def interrupt_kernel(self) -> None:
        """Interrupt the kernel through the upstream."""
        await self.mapping.asking(super().interrupt_kernel())

    @async_override
    async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        """Stop the kernel on the upstream; its records stay here."""
        self.registry.process_stopping(self, restart=restart)
        try:
            await self.mapping.asking(super().shutdown_kernel(now=now, restart=restart))
        except web.HTTPError:
            self._spawn(self._reconnect())  # still there: follow it again
            raise
        if not restart:
            self.registry.process_gone(self)

    def _server_state(self, state: str) -> None:
        """Follow the upstream's own restart of a kernel that died there."""
        if state == "restarting":
            self.ending = DIED_UPSTREAM
            self._fire("restart")
            self._spawn(self.registry.process_started(self))
        elif state == "dead":
            self.gone(DEAD_UPSTREAM)
        else:  # it is shutting down: stopped there by someone
            self._spawn(self.check_gone(looks=GONE_CHECKS))

    def gone(self, reason: str) -> None:
        """End the kernel here: the upstream no longer runs it, for `reason`."""
        if self.kernel_id in self.registry.live:
            self.ending = reason
            self._fire("dead")

    async def check_gone(self, looks: int) -> None:
        """End the kernel if the upstream says it has no such kernel (asking `looks` times)."""
        for look in range(looks):
            if look:
                await asyncio.sleep(GONE_CHECK_INTERVAL)
            try:
                model = await self.mapping.asking(self.refresh_model())
            except web.HTTPError:
                return  # unreachable: the websocket's reconnection decides
            if model is None:
                self.gone(GONE_UPSTREAM)
                return

    def _lost(self) -> None:
        self._spawn(self._reconnect())

    async def _reconnect(self) -> None:
        """Open the websocket again once the upstream answers; end the kernel if it is gone."""
        delay = RECONNECT_FIRST_DELAY
        reported = ""
        while self.kernel_id in self.registry.live:
            try:
                model = await self.mapping.asking(self.refresh_model())
                if model is None:
                    self.gone(GONE_UPSTREAM)
                    return
                kernel = self.registry.live.get(str(self.kernel_id))
                if kernel is None:
                    return  # stopped meanwhile
                await kernel.take_back_channels()
            except (web.HTTPError, Refusal) as e:
                cause = e.__cause__ if isinstance(e, web.HTTPError) else e
                if isinstance(cause, NotFound):
                    self.gone(GONE_UPSTREAM)
                    return
                if str(cause) != reported:  # said once per cause, not once per try
                    reported = str(cause)
                    self.log.warning("Kernel %s: %s; retrying", self.kernel_id, reported)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_DELAY)
                continue
            self.log.info("Kernel %s: connected to the upstream again", self.kernel_id)
            return

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class UpstreamWebsocketConnection(GatewayWebSocketConnection):
    """jupyter_server's websocket proxy to the upstream, with Nagle's algorithm off."""

    async def connect(self) -> None:
        """Switch Nagle off, then connect as jupyter_server does."""
        self.websocket_handler.set_nodelay(True)
        await super().connect()
