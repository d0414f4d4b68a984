"""The private parts of jupyter_client and jupyter_server that loomgate relies on, each with why.

Every use of a private name in the gateway goes through this module, and
tests/gateway/test_jupyter_internals.py fails loudly when an upgrade removes or renames one.
Everything else uses public API only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jupyter_client.manager import KernelManager
from jupyter_server.services.kernels.kernelmanager import ServerKernelManager


@dataclass(frozen=True)
class PrivateUse:
    """One private attribute loomgate uses: where it lives and why no public one will do."""

    owner: type
    name: str
    why: str


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
)


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

    async def _async_post_start_kernel(self, **kw: Any) -> None:
        await super()._async_post_start_kernel(**kw)
        await self.process_started()

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        self.process_stopping(restart=restart)
        await super()._async_shutdown_kernel(now=now, restart=restart)
        if not restart:
            self.process_gone()

    async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:  # type: ignore[override]
        """Shut the kernel down (public path: the private one is not reached through it)."""
        self.process_stopping(restart=restart)
        await super().shutdown_kernel(now=now, restart=restart)
        if not restart:
            self.process_gone()
