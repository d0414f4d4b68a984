"""One live kernel's process as loomgate runs it: its start, attaching to it, taking it back,
restarts, death and stop; its cells' lives are its execution tracker's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from loomgate.gateway.errors import Conflict, StoppedWhileStarting, Unavailable
from loomgate.gateway.kernels.execution_tracker import ExecutionTracker
from loomgate.gateway.kernels.iopub_queue import queue_every_message
from loomgate.gateway.kernels.kernel_channels import KernelChannels, Message
from loomgate.gateway.kernels.kernel_kind import KernelKind
from loomgate.gateway.kernels.manager_protocol import ManagedKernel
from loomgate.gateway.kernels.messages import seed_content
from loomgate.gateway.kernels.setup import KernelSetup, clean
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.residency import resident
from loomgate.gateway.residency.kernel_files import last_lines
from loomgate.gateway.residency.provisioned import (
    launch_markers,
    process_ending,
    process_running,
)
from loomgate.gateway.residency.provisioner import ResidentProvisioner
from loomgate.gateway.residency.resident import ResidentLaunch
from loomgate.gateway.residency.unseen_cells import account_for_unseen
from loomgate.gateway.sandbox import record_failure
from loomgate.shared import wire
from loomgate.shared.wire import Kernel, KernelState, ProcessState

if TYPE_CHECKING:
    from loomgate.gateway.events import EventBus

# Where the process is in its life: ready, or the kernel's wire state while it is not.
Phase = Literal["ready", ProcessState]
CONFIRM_TIMEOUT = 60.0
START_TIMEOUT = 30.0
START_OUTPUT_LINES = 10  # of a kernel that failed to start, read for its last words
START_OUTPUT_SHOWN = 3  # of them, the non-empty ones shown with the reason, on one line
START_OUTPUT_CHARS = 400


class LoomKernel:
    """A kernel process as loomgate runs it, with its records, its setup, its holders and the
    tracker of its executions (`executions`)."""

    def __init__(
        self,
        km: ManagedKernel,
        store: RecordStore,
        events: EventBus,
        log: logging.Logger,
        launch: ResidentLaunch,
    ) -> None:
        self.km = km
        self.mapping = km.mapping  # read once: every IOPub message reaches it
        self.launch = launch  # what a restart needs, kept for the gateway that takes it back
        self.store = store
        self.events = events
        self.log = log
        self.phase: Phase = "starting"
        self.channels: KernelChannels | None = None
        self.kind = KernelKind()  # its language and implementation, from its kernel_info
        self.setup = KernelSetup(store)
        self.executions = ExecutionTracker(self, store, self.setup, events, log)
        self.held_by: list[str] = []  # who holds it (translators' open connections), one each
        self.stops_at: float | None = None  # when its grace ends, unheld (kernels/holders.py)
        self._settled = asyncio.Event()  # set while the phase is not starting or restarting
        self._stop_asked = asyncio.Event()  # a stop came while the process was starting
        # Set while its process is replaced by a checkpoint's copy: which, as the record says it.
        self.rolling_back: str | None = None

    # -- identity -----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """Return the Jupyter kernel id."""
        return self.store.kernel_id

    @property
    def name(self) -> str | None:
        """Return the loomgate name, if the kernel has one."""
        return self.store.meta.get("name")

    @property
    def lifetime(self) -> str:
        """Return `persistent` or `conversation`."""
        return str(self.store.meta.get("lifetime", "persistent"))

    # -- process lifecycle (called by the kernel manager) -------------------------------------

    async def process_started(self, prepare: dict[str, Any] | None = None) -> None:
        """Attach fresh channels to a just-launched process, prove IOPub live, run `prepare` (a
        silent execute_request) if given, seed its counter, run its setup; given up at once
        (Unavailable) when a stop is asked meanwhile (`abandon_start`)."""
        start = asyncio.ensure_future(self._start(prepare))
        stop = asyncio.ensure_future(self._stop_asked.wait())
        try:
            await asyncio.wait({start, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not start.done():
            start.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await start
            raise StoppedWhileStarting
        start.result()

    def abandon_start(self) -> None:
        """Give up a start or restart in progress (a stop is asked): its wait for the process
        to answer ends now, and the start fails, instead of holding the stop up to its timeout."""
        if self.phase in ("starting", "restarting"):
            self._stop_asked.set()

    async def _start(self, prepare: dict[str, Any] | None) -> None:
        try:
            await self._attach(CONFIRM_TIMEOUT)
            if prepare is not None:
                await self._prepare(prepare)
        except (RuntimeError, TimeoutError) as e:
            raise Unavailable(self.start_failure(e)) from None
        self.executions.process_restarted()
        # A checkpoint's state ran its setup already.
        await self._in_step(run_setup=self.rolling_back is None)
        self.rolling_back = None
        self._ready()

    def start_failure(self, error: Exception) -> str:
        """Return why the process did not become a kernel: how it ended (or `error`), and the
        last lines it printed."""
        if process_running(self.km):
            reason = str(error)
        else:
            reason = f"the kernel did not start: {process_ending(self.km).reason}"
        provisioner = self.km.provisioner
        log_path = provisioner.log_path if isinstance(provisioner, ResidentProvisioner) else None
        since = provisioner.log_start if isinstance(provisioner, ResidentProvisioner) else 0
        tail = last_lines(log_path, START_OUTPUT_LINES, since) if log_path is not None else ""
        said = [line.strip() for line in clean(tail).splitlines() if line.strip()]
        last = " / ".join(said[-START_OUTPUT_SHOWN:])
        if len(last) > START_OUTPUT_CHARS:
            last = "…" + last[-START_OUTPUT_CHARS:]
        return reason + (f"; its last output: {last}" if last else "")

    async def take_back(
        self, running: ExecutionRecord | None, timeout: float, *, revived: bool = False
    ) -> None:
        """Take back a running process (an earlier gateway's, or one whose channels dropped):
        its counter and variables as they are; a `revived` one (started again after it ended
        while no gateway watched) is a fresh process, as after a restart.

        `running` is the execution that was running when the gateway stopped listening. Its
        output since then is not recoverable (the record notes the gap); it is followed to its
        end, or ends `lost` if it ended unseen.
        """
        await self._attach(timeout)
        if revived:
            await self._in_step(run_setup=True)
        elif running is not None:
            self.executions.follow_after_gap(running)
        elif self.kind.ipykernel and self.channels is not None:
            try:
                await account_for_unseen(self.channels, self.store, self.log)
            except (RuntimeError, TimeoutError) as e:
                self.log.warning("Kernel %s: cells it ran unseen not counted: %s", self.id, e)
        self._ready()

    def show_activity_to_jupyter(self) -> None:
        """Give jupyter_server's model (`/api/kernels`, the culler) the kernel's last activity
        as loomgate knows it (a kernel taken back would show the moment it was taken back)."""
        when = datetime.fromtimestamp(self.executions.last_activity, timezone.utc)
        self.km.last_activity = when

    async def take_back_channels(self) -> None:
        """Take the process back after its channels dropped (it ran on); the running
        execution's output in between may be missing, and its record says so."""
        try:
            await self.take_back(self.executions.current, CONFIRM_TIMEOUT)
        except (RuntimeError, TimeoutError) as e:
            raise Unavailable(str(e)) from None

    async def _attach(self, timeout: float) -> None:
        """Open fresh channels to the process and prove them live (kernel_info on control)."""
        self.close_channels()
        channels = self.channels = self.km.open_channels(
            on_iopub=self._on_iopub, on_stdin=self.executions.on_stdin
        )
        reply = await channels.confirm(timeout, alive=self._process_running)
        if "language_info" in reply["content"]:
            self.kind = KernelKind.of(reply["content"])
        else:  # busy (taken back mid-cell): what it said when it started
            self.kind = KernelKind.of(
                {"implementation": self.store.meta.get("implementation"), **self.store.meta}
            )
        self.store.meta["implementation"] = self.kind.implementation
        if self.kind.ipykernel and channels.local:
            queue_every_message(channels, self.log, self.id)
        language_info = reply["content"].get("language_info")
        if isinstance(language_info, dict):
            self.store.meta["language_info"] = language_info  # the notebook export's
        if isinstance(self.km.provisioner, ResidentProvisioner):
            if self.launch["cwd"] is None and self.km.provisioner.cwd is not None:
                self.launch = ResidentLaunch(
                    cwd=str(self.km.provisioner.cwd), env=self.launch["env"]
                )
            if await self.save_resident() and (markers := launch_markers(self.km)) is not None:
                markers.forget(self.id)  # the next gateway finds the process by resident.json

    async def save_resident(self) -> bool:
        """Write what the next gateway takes the kernel back by (its process, its copies);
        return whether it was written."""
        try:
            await resident.save(self.store.directory, self.km, self.launch)
        except OSError as e:
            self.log.error("Kernel %s cannot be taken back after a restart: %s", self.id, e)
            return False
        return True

    def _ready(self) -> None:
        self._set_phase("ready")
        self.km.execution_state = "idle"
        self.events.kernel(self.id, "ready", self.model())

    async def _prepare(self, content: dict[str, Any]) -> None:
        assert self.channels is not None
        reply = await self.channels.request("execute_request", content, START_TIMEOUT)
        if reply["content"].get("status") != "ok":
            error = reply["content"]
            raise RuntimeError(f"{error.get('ename')}: {error.get('evalue')}")

    async def _in_step(self, *, run_setup: bool) -> None:
        """Bring a new process in step with the records: its counter seeded to count on from
        them, and (unless `run_setup` is false) the kernel's setup run in it."""
        # A fork's process counts on from its origin's cells: its own records begin at 1.
        forked = self.store.meta.get("forked_from") is not None
        if self.kind.ipykernel and (self.store.last_number > 0 or forked):
            await self._seed_counter(self.store.last_number + 1)
        assert self.channels is not None
        if run_setup:
            await self.setup.run(self.channels, self.kind)

    async def _seed_counter(self, next_number: int) -> None:
        # Silent executes are not counted by IPython and get no record.
        assert self.channels is not None
        await self.channels.request("execute_request", seed_content(next_number), START_TIMEOUT)

    def process_stopping(self, *, restart: bool) -> None:
        """End the running execution (killed by a reset or stop) and drop the channels."""
        if restart and self.rolling_back is not None:
            self.store.note_restart("rollback", self.rolling_back)
        elif restart and self.phase != "restarting":  # after a death, the restarter's restart
            self.store.note_restart("reset")
        self._set_phase("restarting" if restart else "dead")
        if restart:
            self.events.kernel(self.id, "restarting", self.model())
        self.executions.process_stopping(restart=restart)
        self.close_channels()

    def process_died(self, *, restarting: bool) -> None:
        """Mark the running execution `died` (the process exited on its own)."""
        ending = process_ending(self.km)
        self.log.warning("Kernel %s died: %s", self.id, ending.reason)
        self.executions.process_died(ending, restarting=restarting)
        phase: Literal["restarting", "dead"] = "restarting" if restarting else "dead"
        self._set_phase(phase)
        self.events.kernel(self.id, phase, self.model(), ending.reason)

    def leave(self) -> None:
        """Let go of the process without ending it (the gateway exits; a later one takes it back).

        What the running execution printed so far is on disk; the rest is followed then.
        """
        self.executions.leave()
        self.close_channels()

    def process_gone(self) -> None:
        """Note that the kernel has been shut down for good."""
        self._set_phase("gone")

    def _set_phase(self, phase: Phase) -> None:
        self.phase = phase
        if phase in ("starting", "restarting"):
            self._settled.clear()
        else:
            self._settled.set()

    def _process_running(self) -> bool:
        return process_running(self.km)

    def close_channels(self) -> None:
        """Close the gateway's sockets to the kernel."""
        if self.channels is not None:
            self.channels.close()
            self.channels = None

    # -- requests -----------------------------------------------------------------------------

    async def register_setup(self, parts: list[wire.SetupPart], timeout: float) -> bool:
        """Make `parts` this kernel's setup, run now (and after every restart) unless they
        already ran in this process; return whether they ran now."""
        await self.settle()
        if self.phase != "ready" or self.channels is None:
            raise Unavailable(f"the kernel is {self.phase}; try again when it is ready")
        for part in parts:
            if part.get("required") and not self.kind.runs(part):
                raise Conflict(f"{part['name']} is required, and {self.kind.skipped(part)}")
        return await self.setup.register(parts, self.channels, self.kind, timeout)

    async def settle(self) -> None:
        """Return once a start or restart in progress has ended (or START_TIMEOUT passed)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._settled.wait(), START_TIMEOUT)

    def sandbox_failure(
        self, record: ExecutionRecord, died: wire.Death | None
    ) -> wire.SandboxFailure | None:
        """Return the sandbox rule an ending cell ran into (None: none, or not confined)."""
        provisioner = self.km.provisioner
        launch = provisioner.sandbox if isinstance(provisioner, ResidentProvisioner) else None
        return record_failure(record, self.store, died, launch)

    async def signal_interrupt(self) -> None:
        """Send the process an interrupt (through its kernel manager)."""
        await self.km.interrupt_kernel()

    def _on_iopub(self, msg: Message) -> None:
        """Note the kernel's activity for jupyter_server, then hand the message to the tracker."""
        self.mapping.note_activity(self.km, msg)
        self.executions.on_iopub(msg)

    # -- wire ---------------------------------------------------------------------------------

    @property
    def holders(self) -> int:
        """Return how many open connections hold this kernel."""
        return len(self.held_by)

    def state(self) -> KernelState:
        """Return one word: starting, idle, busy, awaiting_input, restarting or dead."""
        if self.phase != "ready":
            return self.phase
        current = self.executions.current
        if current is not None:
            return "awaiting_input" if current.state == "awaiting_input" else "busy"
        return "idle"

    def model(self) -> Kernel:
        """Return the kernel's wire form: what its records know, plus its live state."""
        model = self.store.model()
        model["state"] = self.state()
        model["alive"] = self.phase not in ("dead", "gone")
        current = self.executions.current
        model["current_execution"] = current.number if current else None
        model["last_activity"] = self.executions.last_activity
        model["connections"] = self.holders + self.mapping.connections(self.id)
        model["holders"] = self.holders
        model["held_by"] = list(self.held_by)
        model["stops_at"] = self.stops_at
        model["ended"] = None
        model["end_reason"] = None
        model["setup"] = self.setup.model()
        provisioner = self.km.provisioner
        family = provisioner.family if isinstance(provisioner, ResidentProvisioner) else None
        model["checkpoints"] = family.wire() if family is not None else []
        return model
