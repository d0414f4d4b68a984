"""What the kernels package asks of Jupyter's kernel managers, local (manager.py) or on an upstream
(upstream/manager.py): the kernel map and each kernel's manager, as Protocols."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol

from jupyter_client.manager import KernelManager
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase

from loomgate.gateway.kernels.kernel_channels import Handler, KernelChannels, Message


class KernelMap(Protocol):
    """The server's map of kernels (a MappingKernelManager) with loomgate's additions."""

    @property
    def upstream(self) -> str | None:
        """Return the upstream's URL when the kernels run there (None: local processes)."""

    @property
    def default_kernel_name(self) -> str:
        """Return the kernel spec a kernel gets when none is asked for."""

    async def kernel_specs(self) -> list[str]:
        """Return the names of the kernel specs kernels can be started with."""

    async def list_upstream(self) -> list[dict[str, Any]]:
        """Return the models of every kernel the upstream runs (none when kernels are local)."""

    def note_activity(self, km: Any, msg: Message) -> None:
        """Update a kernel's activity markers from one of its IOPub messages."""

    def connections(self, kernel_id: str) -> int:
        """Return how many Jupyter websockets (other than loomgate's) are open on the kernel."""

    def __contains__(self, kernel_id: str) -> bool:
        """Return whether the map has a kernel `kernel_id`."""

    def get_kernel(self, kernel_id: str) -> KernelManager:
        """Return the manager of kernel `kernel_id`."""

    async def start_kernel(self, **kwargs: Any) -> str:
        """Start a kernel (or attach to the upstream's `kernel_id`) and return its id."""

    async def shutdown_kernel(self, kernel_id: str, now: bool = False) -> None:
        """Stop kernel `kernel_id`."""

    async def restart_kernel(self, kernel_id: str, now: bool = False) -> None:
        """Restart kernel `kernel_id`."""


async def start_ended(mkm: KernelMap, kernel_id: str) -> None:
    """Return once kernel `kernel_id`'s start has ended, raising how it failed.

    With `use_pending_kernels` (a person's Jupyter may set it) `start_kernel` returns while the
    process still starts; loomgate's own starts go on only once it has.
    """
    if kernel_id not in mkm:  # a failed pending start is dropped from the map
        return
    ready = mkm.get_kernel(kernel_id).ready
    # Shielded: a caller given up must not cancel the future the map's own task awaits.
    await asyncio.shield(ready if isinstance(ready, asyncio.Future) else asyncio.wrap_future(ready))


def kernel_id_of(km: ManagedKernel) -> str:
    """Return the id of a kernel that has started (every kernel loomgate is told of)."""
    kernel_id = km.kernel_id
    assert kernel_id is not None
    return kernel_id


class ManagedKernel(Protocol):
    """One kernel's manager (a ServerKernelManager) with loomgate's additions."""

    kernel_name: str
    connection_file: str
    provisioner: KernelProvisionerBase | None
    execution_state: str | None
    last_activity: datetime

    @property
    def kernel_id(self) -> str | None:
        """Return the kernel's id (set once it has started)."""

    @property
    def mapping(self) -> KernelMap:
        """Return the kernel map this kernel belongs to."""

    def open_channels(self, *, on_iopub: Handler, on_stdin: Handler) -> KernelChannels:
        """Return loomgate's own connections to the kernel."""

    async def interrupt_kernel(self) -> None:
        """Interrupt the kernel."""

    def add_restart_callback(self, callback: Callable[[], None], event: str = "restart") -> None:
        """Call `callback` when the kernel is restarted (`restart`) or given up on (`dead`)."""

    def stop_restarter(self) -> None:
        """Stop watching the process for deaths."""

    def cleanup_resources(self, restart: bool = False) -> Awaitable[None]:
        """Release the connection file and ports of a process that has ended."""
