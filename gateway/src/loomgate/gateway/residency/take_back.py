"""Taking back, when the gateway starts, the kernels an earlier gateway left running.

A kernel is taken back only once it is proved to be that kernel: its pid runs with the start
time recorded at launch (a reused pid never passes), and it answers kernel_info, signed with
its own key, on its own channels within TAKE_BACK_TIMEOUT. It keeps its id, name, variables and
numbering, and any Jupyter client sees it in /api/kernels again.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from jupyter_client.provisioning.factory import KernelProvisionerFactory
from jupyter_server.services.kernels.kernelmanager import MappingKernelManager

from loomgate.gateway.events import EventBus
from loomgate.gateway.jupyter_internals import register_taken_back_kernel, restore_launch_arguments
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.residency import resident
from loomgate.gateway.residency.kernel_files import remove_kernel_files
from loomgate.gateway.residency.launch_arguments import LAUNCH_ARGUMENT, LaunchArguments
from loomgate.gateway.residency.launch_markers import LaunchMarkers
from loomgate.gateway.residency.provisioner import ResidentProvisioner
from loomgate.gateway.residency.resident import ResidentError, ResidentLaunch, ResidentState
from loomgate.shared.wire import Death

TAKE_BACK_TIMEOUT = 10.0
# A kernel that is ours but did not answer (stopped, or busy in code that holds the GIL) is
# neither ended nor forgotten: it is tried again this often until it answers or its process ends.
RETRY_SECONDS = 5.0
ENDED_WHILE_AWAY = "the kernel process ended while the gateway was down"


class Activity(Protocol):
    """When a kernel was last active (its execution tracker's)."""

    last_activity: float


class TakenBack(Protocol):
    """What taking back asks of the live kernel it makes of a process proved ours (a LoomKernel,
    made by kernels/: residency sits below it)."""

    @property
    def id(self) -> str:
        """Return the kernel's id."""

    @property
    def executions(self) -> Activity:
        """Return its executions' tracker (when it was last active)."""

    async def take_back(
        self, running: ExecutionRecord | None, timeout: float, *, revived: bool = False
    ) -> None:
        """Attach to the running process and prove it answers within `timeout` (`revived`: a
        fresh process, started again, as after a restart)."""

    def close_channels(self) -> None:
        """Close the gateway's sockets to the kernel."""

    def show_activity_to_jupyter(self) -> None:
        """Give jupyter_server's model the kernel's last activity as loomgate knows it."""


Kernel = TypeVar("Kernel", bound=TakenBack)
# Makes the live kernel of a process taken back: its manager (a LoomKernelManager), its records
# and what its restarts need.
MakeKernel = Callable[[Any, RecordStore, ResidentLaunch], Kernel]


class TakeBack(Generic[Kernel]):
    """Takes back the kernels of `stores` into `live`, and tries again, every RETRY_SECONDS,
    those that are ours but did not answer; `make` makes each live kernel, and `wire_up`
    follows each kernel taken back."""

    def __init__(
        self,
        mkm: object,
        live: dict[str, Kernel],
        events: EventBus,
        log: logging.Logger,
        make: MakeKernel[Kernel],
        wire_up: Callable[[Kernel], None],
        markers: LaunchMarkers | None = None,
    ) -> None:
        self.mkm = mkm  # the server's kernel map: a MappingKernelManager (its kernels are local)
        self.markers = markers  # where the restarts of kernels taken back mark their launches
        self.live = live
        self.events = events
        self.log = log
        self.make = make
        self.wire_up = wire_up
        self.retries: set[asyncio.Task[None]] = set()

    async def all(self, stores: list[RecordStore]) -> None:
        """Take back every kernel of `stores` that is still alive and still ours."""
        await asyncio.gather(*(self.one(store) for store in stores))

    async def one(self, store: RecordStore) -> None:
        """Take back one kernel, or note why not (its records stay either way)."""
        try:
            state = resident.load(store.directory, store.kernel_id)
        except ResidentError as e:
            # Left as it is: a gateway that knows the format may still take it back.
            self.log.warning("Not taking back kernel %s: %s", store.kernel_id, e)
            return
        try:
            provisioner = await provisioner_for(self.mkm, state, self.markers)
        except Exception as e:
            self.log.warning("Not taking back kernel %s: %s", store.kernel_id, e)
            return
        pid = provisioner.pid
        revived = False
        if not provisioner.is_ours():
            if not await provisioner.revive():
                # Its copies end with it, and its sandbox unless its forks or origin use it (a
                # sandbox init still running, killed from outside, ends with it).
                await provisioner.ended()
                self.ended_while_away(store, ENDED_WHILE_AWAY)
                remove_kernel_files(state["connection_file"], keep_log_in=store.directory)
                return
            revived = True  # its checkpoints outlived it: it starts again, to roll back
            self.died_while_away(store)
        km = provisioner.parent
        assert km is not None
        if provisioner.sandbox is not None:  # its way out, where it was
            await provisioner.sandbox.open_network()
        kernel = self.make(km, store, state["launch"])
        self.live[kernel.id] = kernel
        running = store.running_when_left()
        # Its activity is its records' last, not the probes, seeding and setup of taking it back.
        last_activity = kernel.executions.last_activity = store.last_activity()
        try:
            await kernel.take_back(running, TAKE_BACK_TIMEOUT, revived=revived)
        except Exception as e:
            self.live.pop(kernel.id, None)
            kernel.close_channels()
            if provisioner.sandbox is not None and not provisioner.shares_sandbox():
                await provisioner.sandbox.close_network()  # the next try opens it again
            reason = (
                f"its process (pid {pid}) runs but did not answer when the gateway came back "
                f"({describe(e)}); it is tried again every {RETRY_SECONDS:g} s"
            )
            self.log.warning("Not taking back kernel %s yet: %s", store.kernel_id, reason)
            store.note_pending(reason)
            self.retry_later(store)
            return
        if store.meta.get("end_reason"):
            store.note_pending(None)
        await km.post_start_kernel()  # jupyter_client's restarter and control socket
        assert isinstance(self.mkm, MappingKernelManager)  # a local kernel's map
        await register_taken_back_kernel(self.mkm, kernel.id, km)
        kernel.executions.last_activity = last_activity
        kernel.show_activity_to_jupyter()
        self.wire_up(kernel)
        self.log.info("Took back kernel %s (pid %s)", kernel.id, pid)

    def retry_later(self, store: RecordStore) -> None:
        """Try again, RETRY_SECONDS from now, to take back a kernel that is ours but did not
        answer (unless it was taken back or ended meanwhile)."""

        async def retry() -> None:
            await asyncio.sleep(RETRY_SECONDS)
            if store.kernel_id not in self.live and store.meta.get("ended") is None:
                await self.one(store)

        task = asyncio.get_running_loop().create_task(retry())
        self.retries.add(task)
        task.add_done_callback(self.retries.discard)

    def died_while_away(self, store: RecordStore) -> None:
        """Note that a kernel's process ended while no gateway listened, and that it started
        again (its records and checkpoints stay)."""
        end_running(store, Death(reason=ENDED_WHILE_AWAY, cause="unknown", restarted=True))
        store.note_restart("died", ENDED_WHILE_AWAY)
        self.log.warning("Kernel %s died while away; started again", store.kernel_id)

    def ended_while_away(self, store: RecordStore, reason: str) -> None:
        """Note that a kernel left running by an earlier gateway is gone (its records stay)."""
        end_running(store, Death(reason=reason, cause="unknown", restarted=False))
        store.mark_ended(reason)
        resident.remove(store.directory)
        self.log.warning("Kernel %s is gone: %s", store.kernel_id, reason)
        self.events.kernel(store.kernel_id, "stopped", store.model(), reason)


def end_running(store: RecordStore, died: Death) -> None:
    """End `died` the execution that ran when the gateway left, if any (its process is gone)."""
    running = store.running_when_left()
    if running is not None:
        running.end_unseen("died", "the kernel process is gone", died=died)


def describe(error: Exception) -> str:
    """Return why a kernel did not answer, in a few words."""
    if isinstance(error, TimeoutError):
        return f"no kernel_info reply within {TAKE_BACK_TIMEOUT:g} s"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def provisioner_for(
    mkm: object, state: ResidentState, markers: LaunchMarkers | None = None
) -> ResidentProvisioner:
    """Return a kernel manager's provisioner loaded with the process `state` describes (its
    restarts marked in `markers`)."""
    assert isinstance(mkm, MappingKernelManager)  # kernels taken back are local processes
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
    arguments: dict[str, object] = {"cwd": launch["cwd"], "env": {**os.environ, **launch["env"]}}
    # Its restarts start it under the same sandbox.
    arguments[LAUNCH_ARGUMENT] = LaunchArguments(provisioner.rules, markers=markers)
    provisioner.markers = markers
    restore_launch_arguments(km, arguments)
    return provisioner
