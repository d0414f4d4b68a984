"""jupyter_server's kernel plumbing, adapted: lifecycle hooks for the registry, nodelay sockets."""

from __future__ import annotations

from typing import Any

from jupyter_server._tz import utcnow
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from jupyter_server.services.kernels.kernelmanager import (
    AsyncMappingKernelManager,
    ServerKernelManager,
)
from traitlets import Unicode

from loomgate.gateway.registry import KernelRegistry


class LoomKernelManager(ServerKernelManager):
    """A ServerKernelManager whose start, restart and shutdown paths all reach the registry.

    Hooking here rather than on jupyter_server's async event listener makes the IOPub
    subscription part of the start itself: no execute can reach the kernel before it.
    """

    @property
    def registry(self) -> KernelRegistry:
        """Return the gateway's kernel registry."""
        return self.parent.loom_registry  # type: ignore[no-any-return]

    async def _async_post_start_kernel(self, **kw: Any) -> None:
        await super()._async_post_start_kernel(**kw)
        await self.registry.process_started(self)

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        # The restart path (manual or after a death) comes through here.
        self.registry.process_stopping(self, restart=restart)
        await super()._async_shutdown_kernel(now=now, restart=restart)
        if not restart:
            self.registry.process_gone(self)

    async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        """Shut the kernel down, telling the registry before and after."""
        self.registry.process_stopping(self, restart=restart)
        await super().shutdown_kernel(now=now, restart=restart)
        if not restart:
            self.registry.process_gone(self)


class LoomMappingKernelManager(AsyncMappingKernelManager):
    """jupyter_server's kernel map, making LoomKernelManagers and carrying the registry."""

    kernel_manager_class = Unicode("loomgate.gateway.kernel_manager.LoomKernelManager", config=True)
    loom_registry: KernelRegistry

    def start_watching_activity(self, kernel_id: str) -> None:
        """Set the activity markers; loomgate's own IOPub subscriber keeps them current.

        jupyter_server would open a second IOPub socket per kernel and decode every message
        again; `note_activity` does its job from the messages loomgate already decodes.
        """
        kernel = self._kernels[kernel_id]
        kernel.reason = ""
        kernel.last_activity = utcnow()

    def note_activity(self, km: LoomKernelManager, msg: dict[str, Any]) -> None:
        """Update last_activity and execution_state from an IOPub message like jupyter_server."""
        msg_type = msg["header"]["msg_type"]
        parent_type = msg["parent_header"].get("msg_type")
        tracked = self.track_message_type(parent_type)
        if self.track_message_type(msg_type) or tracked or km.execution_state == "busy":
            self.last_kernel_activity = km.last_activity = utcnow()
        if msg_type == "status":
            state = msg["content"]["execution_state"]
            if tracked:
                km.execution_state = state
            elif km.execution_state == "starting" and state != "starting":
                km.execution_state = "idle"


class NodelayWebsocketConnection(ZMQChannelsWebsocketConnection):
    """The standard kernel websocket, with Nagle's algorithm off for its whole life.

    Tornado turns TCP_NODELAY off again after the upgrade response, so a reply's second small
    frame waits for the client's delayed ACK: ~40 ms per trivial execute instead of ~5 ms.
    """

    async def connect(self) -> None:
        """Switch Nagle off, then connect as jupyter_server does."""
        self.websocket_handler.set_nodelay(True)
        await super().connect()
