"""Taking back, when the gateway starts, the kernels an earlier gateway left running.

A kernel is taken back only once it is proved to be that kernel: its pid runs with the start
time recorded at launch (a reused pid never passes), and it answers kernel_info, signed with
its own key, on its own channels within ADOPT_TIMEOUT. It keeps its id, name, variables and
numbering, and any Jupyter client sees it in /api/kernels again.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from jupyter_client.provisioning.factory import KernelProvisionerFactory

from loomgate.gateway.jupyter_internals import register_adopted_kernel, restore_launch_arguments
from loomgate.gateway.kernels import resident
from loomgate.gateway.kernels.kernel import LoomKernel
from loomgate.gateway.kernels.provisioner import ResidentProvisioner
from loomgate.gateway.kernels.resident import ResidentError, ResidentState
from loomgate.gateway.records.store import RecordStore

if TYPE_CHECKING:
    from loomgate.gateway.kernels.registry import KernelRegistry

ADOPT_TIMEOUT = 10.0
# A kernel that is ours but did not answer (stopped, or busy in code that holds the GIL) is
# neither ended nor forgotten: it is tried again this often until it answers or its process ends.
RETRY_SECONDS = 5.0


async def take_back(registry: KernelRegistry, stores: list[RecordStore]) -> None:
    """Take back every kernel of `stores` that is still alive and still ours."""
    await asyncio.gather(*(take_back_one(registry, store) for store in stores))


async def take_back_one(registry: KernelRegistry, store: RecordStore) -> None:
    """Take back one kernel, or note why not (its records stay either way)."""
    try:
        state = resident.load(store.directory, store.kernel_id)
    except ResidentError as e:
        # Left as it is: a gateway that knows the format may still take it back.
        registry.log.warning("Not taking back kernel %s: %s", store.kernel_id, e)
        return
    try:
        provisioner = await provisioner_for(registry, state)
    except Exception as e:
        registry.log.warning("Not taking back kernel %s: %s", store.kernel_id, e)
        return
    pid = provisioner.pid
    if not provisioner.is_ours():
        registry.ended_while_away(store, "the kernel process ended while the gateway was down")
        return
    km = provisioner.parent
    assert km is not None
    kernel = LoomKernel(km, store, registry.events, registry.log, state["launch"])
    registry.live[kernel.id] = kernel
    try:
        await kernel.adopt(store.running_when_left(), ADOPT_TIMEOUT)
    except Exception as e:
        registry.live.pop(kernel.id, None)
        kernel.close_channels()
        reason = (
            f"its process (pid {pid}) runs but did not answer when the gateway came back "
            f"({describe(e)}); it is tried again every {RETRY_SECONDS:g} s"
        )
        registry.log.warning("Not taking back kernel %s yet: %s", store.kernel_id, reason)
        store.note_pending(reason)
        retry_later(registry, store)
        return
    if store.meta.get("end_reason"):
        store.note_pending(None)
    await km.post_start_kernel()  # jupyter_client's restarter and control socket
    await register_adopted_kernel(registry.mkm, kernel.id, km)
    registry.wire_up(kernel)
    registry.log.info("Took back kernel %s (pid %s)", kernel.id, pid)


def retry_later(registry: KernelRegistry, store: RecordStore) -> None:
    """Try again, RETRY_SECONDS from now, to take back a kernel that is ours but did not
    answer (unless it was taken back or ended meanwhile)."""

    async def retry() -> None:
        await asyncio.sleep(RETRY_SECONDS)
        if store.kernel_id not in registry.live and store.meta.get("ended") is None:
            await take_back_one(registry, store)

    task = asyncio.get_running_loop().create_task(retry())
    registry.retries.add(task)
    task.add_done_callback(registry.retries.discard)


def describe(error: Exception) -> str:
    """Return why a kernel did not answer, in a few words."""
    if isinstance(error, TimeoutError):
        return f"no kernel_info reply within {ADOPT_TIMEOUT:g} s"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def provisioner_for(registry: KernelRegistry, state: ResidentState) -> ResidentProvisioner:
    """Return a kernel manager's provisioner loaded with the process `state` describes."""
    mkm = registry.mkm
    km = mkm.kernel_manager_factory(
        parent=mkm,
        log=mkm.log,
        kernel_name=state["kernel_name"],
        connection_file=state["connection_file"],
        owns_kernel=True,
    )
    km.kernel_id = state["kernel_id"]
    km.load_connection_info(state["provisioner"]["connection_info"])
    factory = KernelProvisionerFactory.instance(parent=mkm.parent)
    provisioner = factory.create_provisioner_instance(km.kernel_id, km.kernel_spec, parent=km)
    if not isinstance(provisioner, ResidentProvisioner):
        raise ResidentError(
            f"kernel spec {state['kernel_name']!r} now uses the provisioner "
            f"{type(provisioner).__name__}, which cannot take back a running kernel"
        )
    await provisioner.load_provisioner_info(state["provisioner"])
    km.provisioner = provisioner
    launch = state["launch"]
    restore_launch_arguments(km, {"cwd": launch["cwd"], "env": {**os.environ, **launch["env"]}})
    return provisioner
