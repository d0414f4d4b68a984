"""The private parts of jupyter_client and jupyter_server that loomgate relies on, each with why.

Every use of a private name in the gateway goes through this module, and
tests/gateway/test_jupyter_internals.py fails loudly when an upgrade removes or renames one.
Everything else uses public API only. `async_override` types the coroutines that override
jupyter_client's kernel-manager methods, which its base classes declare synchronous.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from jupyter_client import manager
from jupyter_client.manager import KernelManager
from jupyter_client.multikernelmanager import MultiKernelManager
from jupyter_server.services.kernels.kernelmanager import (
    MappingKernelManager,
    ServerKernelManager,
)

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class PrivateUse:
    """One private name loomgate uses: where it lives and why no public one will do.

    A method must still exist on `owner`; an attribute (set in __init__, so absent from the
    class) must still be read by each of `read_by`, the code whose behaviour loomgate relies on.
    """

    owner: type
    name: str
    why: str
    read_by: tuple[Callable[..., Any], ...] = ()


PRIVATE_USES: tuple[PrivateUse, ...] = (
    PrivateUse(
        KernelManager,
        "_async_post_start_kernel",
        "the one step that both start_kernel and restart_kernel run once the process is "
        "launched, before anyone can send it a cell: loomgate's IOPub subscriber must attach "
        "there (a late ZMQ subscriber misses messages)",
    ),
    PrivateUse(
        KernelManager,
        "_async_shutdown_kernel",
        "restart_kernel (manual, or the restarter's after a death) stops the old process "
        "through it, not through shutdown_kernel: the running execution ends `killed` there",
    ),
    PrivateUse(
        KernelManager,
        "_launch_args",
        "restart_kernel relaunches a kernel with the arguments of its first start; a kernel "
        "taken back from an earlier gateway was started there, so they are restored here, and "
        "a prewarmed kernel is claimed after its start, so its directory and environment are "
        "laid over them",
        read_by=(KernelManager._async_restart_kernel,),
    ),
    PrivateUse(
        KernelManager,
        "_attempted_start",
        "a kernel taken back was started (by an earlier gateway): without this, its first "
        "restart reuses a finished `ready` future and fails",
        read_by=(manager.in_pending_state,),
    ),
    PrivateUse(
        MultiKernelManager,
        "_kernels",
        "the kernel map has no public way to add a kernel that is already running under a "
        "known id (its external-kernel support gives new ids and does not own the kernel)",
        read_by=(MultiKernelManager.get_kernel, MultiKernelManager.list_kernel_ids),
    ),
    PrivateUse(
        MappingKernelManager,
        "_kernel_connections",
        "the websocket count jupyter_server keeps per kernel starts at 0 for a kernel taken back",
        read_by=(MappingKernelManager.kernel_model,),
    ),
    PrivateUse(
        MappingKernelManager,
        "_finish_kernel_start",
        "what jupyter_server does for a kernel that finished starting (port record, activity "
        "watch, the handler of its death), done for a kernel taken back as for a new one",
    ),
)


def async_override(method: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Any]:
    """Return `method`, a coroutine overriding a kernel manager's start, restart, interrupt or
    shutdown, typed as jupyter_client's base classes declare that method.

    jupyter_client declares them synchronous in KernelManager and MultiKernelManager (run_sync
    wrappers) and rebinds them to coroutines in the async subclasses jupyter_server builds on,
    so an `async def` override is what runs but not what the base declares. The body is checked
    as written; callers see Any (loomgate's own call through kernels/manager_protocol.py).
    """
    return method


def restore_launch_arguments(km: KernelManager, arguments: dict[str, Any]) -> None:
    """Give a kernel taken back the launch arguments its restarts will use."""
    km._launch_args = arguments


def update_launch_arguments(km: KernelManager, changes: dict[str, Any]) -> None:
    """Lay `changes` over the launch arguments a claimed prewarmed kernel's restarts will use."""
    km._launch_args = {**(km._launch_args or {}), **changes}


async def register_taken_back_kernel(
    mkm: MappingKernelManager, kernel_id: str, km: KernelManager
) -> None:
    """Add a running kernel, taken back under its own id, to jupyter_server's kernel map."""
    km._attempted_start = True
    if not km.ready.done():
        km.ready.set_result(None)
    mkm._kernels[kernel_id] = km
    mkm._kernel_connections[kernel_id] = 0
    await mkm._finish_kernel_start(kernel_id)


class HookedKernelManager(ServerKernelManager):
    """jupyter_server's kernel manager, calling three hooks on every start, restart and stop.

    Subclasses implement the hooks; this class is the only place that overrides private methods.
    """

    async def process_started(self) -> None:
        """Run after every launch (first start or restart), before the kernel takes requests."""

    def process_stopping(self, *, restart: bool) -> None:
        """Run before the process is shut down, for a restart or for good."""

    def process_gone(self) -> None:
        """Run once the process has been shut down for good."""

    _starting = False  # between the launch and the end of `process_started`

    def start_restarter(self) -> None:
        """Start jupyter_client's restarter, only once the process has started: a kernel
        that dies while it starts failed to start, and is not started again and again. While
        it starts, the restarter is made but not watching, so that callbacks can be added."""
        super().start_restarter()
        if self._starting:
            super().stop_restarter()

    async def _async_post_start_kernel(self, **kw: Any) -> None:
        self._starting = True
        try:
            await super()._async_post_start_kernel(**kw)
            await self.process_started()
        finally:
            self._starting = False
        self.start_restarter()

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        self.process_stopping(restart=restart)
        await super()._async_shutdown_kernel(now=now, restart=restart)
        if not restart:
            self.process_gone()

    @async_override
    async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        """Shut the kernel down (public path: the private one is not reached through it)."""
        self.process_stopping(restart=restart)
        await super().shutdown_kernel(now=now, restart=restart)
        if not restart:
            self.process_gone()
