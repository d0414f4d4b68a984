"""jupyter_server's kernel plumbing, adapted: lifecycle hooks for the registry, nodelay sockets."""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from jupyter_server.services.kernels.kernelmanager import (
    AsyncMappingKernelManager,
    MappingKernelManager,
)
from tornado import web
from traitlets import Unicode

from loomgate.gateway.errors import Refusal
from loomgate.gateway.jupyter_internals import HookedKernelManager, async_override
from loomgate.gateway.kernels.kernel_channels import Handler, KernelChannels, Message
from loomgate.gateway.kernels.manager_protocol import ManagedKernel
from loomgate.gateway.kernels.start_options import KernelIntent
from loomgate.gateway.kernels.zmq_channels import ZmqChannels
from loomgate.gateway.residency.kernel_files import remove_kernel_files
from loomgate.gateway.residency.launch_arguments import (
    LAUNCH_ARGUMENT,
    LaunchArguments,
    provisioned_by_resident,
)
from loomgate.gateway.residency.provisioner import ResidentProvisioner

if TYPE_CHECKING:
    from loomgate.gateway.kernels.registry import KernelRegistry

# How long a stop waits for the starts it gave up to end (each ends within a probe interval).
ABANDON_TIMEOUT = 5.0
# How long a server's stop waits for pending kernels' shutdowns (jupyter_client's kill comes
# after its shutdown_wait_time, 5 s by default).
PENDING_STOP_TIMEOUT = 30.0


class LoomKernelManager(HookedKernelManager):
    """A kernel manager whose start, restart and shutdown paths all reach the registry.

    Hooking here rather than on jupyter_server's async event listener makes the IOPub
    subscription part of the start itself: no execute can reach the kernel before it.
    """

    @property
    def mapping(self) -> LoomMappingKernelManager:
        """Return the kernel map this kernel belongs to."""
        return cast("LoomMappingKernelManager", self.parent)

    @property
    def registry(self) -> KernelRegistry:
        """Return the gateway's kernel registry."""
        return self.mapping.loom_registry

    def open_channels(self, *, on_iopub: Handler, on_stdin: Handler) -> KernelChannels:
        """Return loomgate's own connections to the kernel process."""
        return ZmqChannels(self, on_iopub=on_iopub, on_stdin=on_stdin)

    async def process_started(self) -> None:
        """Attach the registry to the just-launched process."""
        await self.registry.process_started(self)

    def process_stopping(self, *, restart: bool) -> None:
        """Tell the registry and the provisioner the process is being shut down."""
        if isinstance(self.provisioner, ResidentProvisioner):
            self.provisioner.restarting = restart
        self.registry.process_stopping(self, restart=restart)

    def process_gone(self) -> None:
        """Tell the registry the process is gone for good, and remove its connection file and
        log, whoever started it (jupyter_client removes only a connection file it wrote)."""
        self.registry.process_gone(self)
        remove_kernel_files(self.connection_file)


def session_path(env: dict[str, str], root_dir: str) -> str:
    """Return the notebook (or console) path a Jupyter session starts a kernel for, relative to
    the server's root as the sessions API gives it ("" when no session started it)."""
    started_for = env.get("JPY_SESSION_NAME", "")  # the sessions API sets it: root/dir/name
    if not started_for or started_for == os.environ.get("JPY_SESSION_NAME"):
        return ""  # none, or only inherited from the server's own environment
    try:
        return Path(started_for).resolve().relative_to(Path(root_dir).resolve()).as_posix()
    except ValueError:  # outside the server's root: the path as the session named it
        return started_for


class LoomMappingKernelManager(AsyncMappingKernelManager):
    """jupyter_server's kernel map, making LoomKernelManagers and carrying the registry."""

    kernel_manager_class = Unicode(
        "loomgate.gateway.kernels.manager.LoomKernelManager", config=True
    )
    loom_registry: KernelRegistry
    upstream: str | None = None  # kernels here are local processes

    @async_override
    async def start_kernel(self, **kwargs: Any) -> str:
        """Start a kernel with its launch arguments (a start through the standard Jupyter API
        gets the `jupyter_api` profile of sandbox.toml); a start that fails is an HTTP error
        saying why (jupyter_server's own endpoint would answer 500 "Unhandled error")."""
        try:
            through_jupyter_api = LAUNCH_ARGUMENT not in kwargs
            if not self._provisioned_here(kwargs.get("kernel_name")):
                kwargs.pop(LAUNCH_ARGUMENT, None)  # another provisioner launches it as it is
            elif through_jupyter_api:
                kwargs[LAUNCH_ARGUMENT] = self._jupyter_api_launch(kwargs)
            if through_jupyter_api:
                self._expect_jupyter_api_start(kwargs)
            kernel_id: str = await super().start_kernel(**kwargs)
        except Refusal as e:
            # jupyter_server answers with `log_message` as it is (never formatted with args).
            raise web.HTTPError(e.status, e.message) from e
        session = session_path(kwargs.get("env") or {}, self.root_dir)
        store = self.loom_registry.stores.get(kernel_id)
        if session and store is not None:
            store.note_paths([session])  # a notebook's kernel is known by its path at once
        return kernel_id

    def _provisioned_here(self, kernel_name: str | None) -> bool:
        """Return whether loomgate's provisioner launches kernels of spec `kernel_name` (in a
        person's Jupyter with loomgate enabled, Jupyter's own does, unless configured)."""
        assert self.kernel_spec_manager is not None
        try:
            spec = self.kernel_spec_manager.get_kernel_spec(kernel_name or self.default_kernel_name)
        except Exception:  # an unknown spec: jupyter_client's start says so
            return False
        return provisioned_by_resident(spec, self)

    def _jupyter_api_launch(self, kwargs: dict[str, Any]) -> LaunchArguments:
        """Return the launch arguments of a kernel started through the standard Jupyter API, in
        the directory its start asks for."""
        registry = self.loom_registry
        rules = registry.sandboxes.for_jupyter_api(self._jupyter_api_cwd(kwargs))
        return LaunchArguments(rules, by_loomgate=False, markers=registry.launches)

    def _jupyter_api_cwd(self, kwargs: dict[str, Any]) -> Path:
        """Return the directory a start through the standard Jupyter API asks for (its `path`,
        or the gateway's own)."""
        cwd = kwargs.get("cwd")
        if cwd is None and kwargs.get("path") is not None:
            cwd = self.cwd_for_path(kwargs["path"], env=kwargs.get("env") or {})
        return Path(cwd) if cwd else Path.cwd()

    def _expect_jupyter_api_start(self, kwargs: dict[str, Any]) -> None:
        """Give a start through the standard Jupyter API its id now, and the registry what it
        is started as: open to agents or not (sandbox.toml's `jupyter_api_open_to_agents`, or a
        profile at least as strict as the default)."""
        kernel_id = kwargs.get("kernel_id") or self.new_kernel_id(**kwargs)
        kwargs["kernel_id"] = kernel_id
        launch = kwargs.get(LAUNCH_ARGUMENT)
        rules = launch.rules if isinstance(launch, LaunchArguments) else None
        sandboxes = self.loom_registry.sandboxes
        opened = sandboxes.jupyter_api_open_to_agents(rules, self._jupyter_api_cwd(kwargs))
        self.loom_registry.expect_start(kernel_id, KernelIntent(open_to_agents=opened))

    @async_override
    async def shutdown_kernel(
        self, kernel_id: str, now: bool = False, restart: bool = False
    ) -> None:
        """Shut a kernel down; one still starting (as kernels do after the start returned, with
        `use_pending_kernels`) gives up its start instead of being waited for."""
        if not restart and kernel_id in self:
            self.loom_registry.abandon_start(kernel_id)
            await self._starts_ended([kernel_id])
        await super().shutdown_kernel(kernel_id, now=now, restart=restart)

    @async_override
    async def shutdown_all(self, now: bool = False) -> None:
        """Shut every kernel down (the server stops with its kernels): starts in progress are
        given up, not waited for (jupyter_client awaits each start before its shutdown).

        Only kernels in the map are shut down: jupyter_client's own shutdown_all also tries the
        id of every start that failed (it keeps them among its pending kernels), and
        jupyter_server answers that with a 404 that stopped the whole server's stop. A kernel
        that fails to shut down is logged; the others are shut down all the same.
        """
        kernel_ids = self.list_kernel_ids()
        self.loom_registry.abandon_starts(kernel_ids)
        await self._starts_ended(kernel_ids)
        present = [kernel_id for kernel_id in kernel_ids if kernel_id in self]
        managers = [self.get_kernel(kernel_id) for kernel_id in present]
        ended = await asyncio.gather(
            *(self._shut_down(kernel_id, now) for kernel_id in present), return_exceptions=True
        )
        for kernel_id, outcome in zip(present, ended, strict=True):
            if isinstance(outcome, BaseException):
                self.log.error("Kernel %s did not shut down cleanly: %r", kernel_id, outcome)
        if self.use_pending_kernels:  # each shutdown returned before its process had ended
            waits = [km.ready for km in managers if isinstance(km.ready, asyncio.Future)]
            if waits:
                await asyncio.wait(waits, timeout=PENDING_STOP_TIMEOUT)
                for wait in waits:
                    if wait.done() and not wait.cancelled():
                        wait.exception()  # a failed start or stop: logged where it failed

    async def _shut_down(self, kernel_id: str, now: bool) -> None:
        """Shut one kernel down as jupyter_server does (its start already given up)."""
        if kernel_id in self:  # gone meanwhile: a start that failed as it was given up
            await super().shutdown_kernel(kernel_id, now=now)

    async def _starts_ended(self, kernel_ids: list[str]) -> None:
        """Return once the given-up starts of `kernel_ids` have ended (at most ABANDON_TIMEOUT).

        jupyter_server's shutdown cancels the task that awaits a pending kernel's `ready`, which
        cancels that future too, and the start then fails to set it (InvalidStateError).
        """
        starting = [
            ready
            for kernel_id in kernel_ids
            if kernel_id in self
            and isinstance(ready := self.get_kernel(kernel_id).ready, asyncio.Future)
            and not ready.done()
        ]
        if not starting:
            return
        waits = [asyncio.shield(ready) for ready in starting]
        await asyncio.wait(waits, timeout=ABANDON_TIMEOUT)
        for wait in waits:  # a failed start is jupyter_client's to log, not asyncio's
            if not wait.done():
                wait.cancel()
            elif not wait.cancelled():
                wait.exception()

    async def kernel_specs(self) -> list[str]:
        """Return the names of the kernel specs kernels can be started with."""
        assert self.kernel_spec_manager is not None
        return sorted(self.kernel_spec_manager.find_kernel_specs())

    async def list_upstream(self) -> list[dict[str, Any]]:
        """Return the kernels of the upstream: none, kernels here are local processes."""
        return []

    def kernel_model(self, kernel_id: str) -> dict[str, Any]:
        """Return a kernel's model; a prewarmed kernel does not exist for Jupyter clients (and
        so is not in `list_kernels`, which skips the kernels this refuses)."""
        if self.loom_registry.pool.is_pooled(kernel_id):
            raise web.HTTPError(404, f"Kernel does not exist: {kernel_id}")
        model: dict[str, Any] = super().kernel_model(kernel_id)
        return model

    def start_watching_activity(self, kernel_id: str) -> None:
        """Set the activity markers; loomgate's own IOPub subscriber keeps them current.

        jupyter_server would open a second IOPub socket per kernel and decode every message
        again; `note_activity` does its job from the messages loomgate already decodes.
        """
        kernel = cast(LoomKernelManager, self.get_kernel(kernel_id))
        kernel.reason = ""
        kernel.last_activity = datetime.now(timezone.utc)

    def note_activity(self, km: ManagedKernel, msg: Message) -> None:
        """Update the kernel's activity markers from one of its IOPub messages."""
        note_activity(self, km, msg)

    def connections(self, kernel_id: str) -> int:
        """Return how many Jupyter websockets are open on the kernel (0 while it starts)."""
        return int(self.kernel_model(kernel_id)["connections"]) if kernel_id in self else 0


def note_activity(mkm: MappingKernelManager, km: ManagedKernel, msg: Message) -> None:
    """Update last_activity and execution_state from an IOPub message, as jupyter_server's own
    activity watch does."""
    msg_type = msg["header"]["msg_type"]
    parent_type = msg["parent_header"].get("msg_type")
    tracked = mkm.track_message_type(parent_type)
    if mkm.track_message_type(msg_type) or tracked or km.execution_state == "busy":
        mkm.last_kernel_activity = km.last_activity = datetime.now(timezone.utc)
    if msg_type == "status":
        state = msg["content"]["execution_state"]
        if tracked:
            km.execution_state = state
        elif km.execution_state == "starting" and state != "starting":
            km.execution_state = "idle"


class NodelayWebsocketConnection(ZMQChannelsWebsocketConnection):
    """The standard kernel websocket, with Nagle's algorithm off for its whole life.

    Tornado turns TCP_NODELAY off again after the upgrade response, so a reply's second small
    frame waits for the client's delayed ACK (up to 40 ms on Linux) before it is sent.
    """

    # jupyter_server's base class declares a coroutine; ZMQChannelsWebsocketConnection, the
    # parent, returns the future the handler awaits, as this does.
    def connect(self) -> asyncio.Future[None] | None:  # type: ignore[override]
        """Switch Nagle off, then connect as jupyter_server does (the handler awaits what this
        returns)."""
        self.websocket_handler.set_nodelay(True)
        return super().connect()
