"""One live kernel as loomgate sees it: its channels, its running execution, its records."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Literal

from loomgate.gateway.errors import Busy, Conflict, Unavailable
from loomgate.gateway.kernels import resident
from loomgate.gateway.kernels.channels import KernelChannels, Message
from loomgate.gateway.kernels.executions import ExecutionTracker
from loomgate.gateway.kernels.messages import cell_content, seed_content
from loomgate.gateway.kernels.provisioner import (
    ResidentProvisioner,
    last_lines,
    process_ending,
    process_running,
)
from loomgate.gateway.kernels.resident import ResidentLaunch
from loomgate.gateway.kernels.setup import KernelSetup
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.shared import wire
from loomgate.shared.wire import Kernel, KernelState

if TYPE_CHECKING:
    from loomgate.gateway.events import EventBus

# Where the process is in its life; every phase but `ready` is also the kernel's wire state.
Phase = Literal["starting", "ready", "restarting", "dead", "gone"]
CONFIRM_TIMEOUT = 60.0
START_TIMEOUT = 30.0
# ipykernel ignores a SIGINT that lands while it is still setting a cell up; an interrupt sent
# this soon after the cell started is repeated until the cell ends (at most a few times).
EARLY_INTERRUPT = 0.5
INTERRUPT_RECHECK = 0.5
INTERRUPT_REPEATS = 5
START_OUTPUT_LINES = 10  # of a kernel that failed to start, shown with the reason


class LoomKernel:
    """A kernel process plus loomgate's bookkeeping: numbering, records, busy state, input."""

    def __init__(
        self,
        km: Any,
        store: RecordStore,
        events: EventBus,
        log: logging.Logger,
        launch: ResidentLaunch,
    ) -> None:
        self.km = km
        self.launch = launch  # what a restart needs, kept for the gateway that takes it back
        self.store = store
        self.events = events
        self.log = log
        self.phase: Phase = "starting"
        self.execution_state = "starting"  # the kernel's own busy/idle
        self.channels: KernelChannels | None = None
        self.executions = ExecutionTracker(store, events)
        self.setup = KernelSetup(store)
        self.held_by: list[str] = []  # who holds it (translators' open connections), one each
        self._died_record: ExecutionRecord | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._settled = asyncio.Event()  # set while the phase is not starting or restarting

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

    @property
    def current(self) -> ExecutionRecord | None:
        """Return the running execution, if any."""
        return self.executions.current

    @property
    def implementation(self) -> str:
        """Return the kernel's implementation (`ipython`), from its kernel_info."""
        return self.executions.implementation

    @property
    def last_activity(self) -> float:
        """Return when the kernel last sent a message or ended an execution."""
        return self.executions.last_activity

    # -- process lifecycle (called by the kernel manager) -------------------------------------

    async def process_started(self, prepare: dict[str, Any] | None = None) -> None:
        """Attach fresh channels to a just-launched process, prove IOPub live, run `prepare` (a
        silent execute_request) if given, seed its counter, run its setup."""
        try:
            await self._attach(CONFIRM_TIMEOUT)
            if prepare is not None:
                await self._prepare(prepare)
        except (RuntimeError, TimeoutError) as e:
            raise Unavailable(self.start_failure(e)) from None
        if self.implementation == "ipython" and self.store.last_number > 0:
            await self._seed_counter(self.store.last_number + 1)
        if self._died_record is not None:
            died = self._died_record.meta["died"]
            assert died is not None  # set when the record died
            died = wire.Death(reason=died["reason"], restarted=True)
            self._died_record.amend(died=died, note="the kernel was restarted; its state is gone")
            self._died_record = None
        assert self.channels is not None
        await self.setup.run(self.channels)
        self._ready()

    def start_failure(self, error: Exception) -> str:
        """Return why the process did not become a kernel: how it ended (or `error`), and the
        last lines it printed."""
        if process_running(self.km):
            reason = str(error)
        else:
            reason = f"the kernel did not start: {process_ending(self.km)}"
        log_path = getattr(self.km.provisioner, "log_path", None)
        tail = last_lines(log_path, START_OUTPUT_LINES) if log_path is not None else ""
        return reason + (f"; its last output:\n{tail}" if tail else "")

    async def adopt(self, running: ExecutionRecord | None, timeout: float) -> None:
        """Take back a process an earlier gateway started: its counter and variables as they are.

        `running` is the execution that was running when that gateway went away. Its output
        since then is not recoverable (the record notes the gap); it is followed to its end, or
        ends `lost` if it ended unseen.
        """
        await self._attach(timeout)
        if running is not None:
            running.note_gap(until=time.time())
            self.executions.follow(running)
            self._spawn(self._settle_after_gap(running))
        self._ready()

    async def rejoin(self) -> None:
        """Open the channels again after they dropped (the process ran on); the running
        execution's output in between may be missing, and its record says so."""
        try:
            await self.adopt(self.current, CONFIRM_TIMEOUT)
        except (RuntimeError, TimeoutError) as e:
            raise Unavailable(str(e)) from None

    async def _attach(self, timeout: float) -> None:
        """Open fresh channels to the process and prove them live (kernel_info on control)."""
        self.close_channels()
        self.channels = self.km.open_channels(
            on_iopub=self._on_iopub, on_stdin=self.executions.on_stdin
        )
        self.executions.channels = self.channels
        reply = await self.channels.confirm(timeout, alive=self._process_running)
        implementation = str(reply["content"].get("implementation", ""))
        self.executions.implementation = self.store.meta["implementation"] = implementation
        if isinstance(self.km.provisioner, ResidentProvisioner):
            if self.launch["cwd"] is None and self.km.provisioner.cwd is not None:
                self.launch = ResidentLaunch(
                    cwd=str(self.km.provisioner.cwd), env=self.launch["env"]
                )
            try:
                await resident.save(self.store.directory, self.km, self.launch)
            except OSError as e:
                self.log.error("Kernel %s cannot be taken back after a restart: %s", self.id, e)

    def _ready(self) -> None:
        self._set_phase("ready")
        self.execution_state = self.km.execution_state = "idle"
        self.events.kernel(self.id, "ready", self.model())

    async def _settle_after_gap(self, record: ExecutionRecord) -> None:
        """End `record` as `lost` if the kernel finished it while no gateway was listening."""
        assert self.channels is not None
        with contextlib.suppress(asyncio.CancelledError):
            await self.channels.drain()
            if not record.final and self.current is record:
                note = "it ended while the gateway was down; how it ended is unknown"
                self.executions.finish(record, "lost", note=note)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` in the background, kept referenced until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _prepare(self, content: dict[str, Any]) -> None:
        assert self.channels is not None
        reply = await self.channels.request("execute_request", content, START_TIMEOUT)
        if reply["content"].get("status") != "ok":
            error = reply["content"]
            raise RuntimeError(f"{error.get('ename')}: {error.get('evalue')}")

    async def _seed_counter(self, next_number: int) -> None:
        # Silent executes are not counted by IPython and get no record.
        assert self.channels is not None
        await self.channels.request("execute_request", seed_content(next_number), START_TIMEOUT)

    def process_stopping(self, *, restart: bool) -> None:
        """End the running execution (killed by a reset or stop) and drop the channels."""
        self._set_phase("restarting" if restart else "dead")
        if restart:
            self.events.kernel(self.id, "restarting", self.model())
        if self.current is not None:
            note = "the kernel was reset" if restart else "the kernel was stopped"
            self.executions.finish(self.current, "killed", note=note)
        self.executions.fail_submissions(Unavailable("the kernel stopped before the cell started"))
        self.close_channels()

    def process_died(self, *, restarting: bool) -> None:
        """Mark the running execution `died` (the process exited on its own)."""
        reason = process_ending(self.km)
        self.log.warning("Kernel %s died: %s", self.id, reason)
        if self.current is not None:
            self._died_record = self.current
            note = "the kernel is being restarted" if restarting else None
            self.executions.finish(
                self.current, "died", died={"reason": reason, "restarted": False}, note=note
            )
        if not restarting and self._died_record is not None:
            self._died_record.amend(note="the kernel could not be restarted and is dead")
            self._died_record = None
        self.executions.fail_submissions(Unavailable(f"the kernel died: {reason}"))
        phase: Literal["restarting", "dead"] = "restarting" if restarting else "dead"
        self._set_phase(phase)
        self.events.kernel(self.id, phase, self.model(), reason)

    def leave(self) -> None:
        """Let go of the process without ending it (the gateway exits; a later one takes it back).

        What the running execution printed so far is on disk; the rest is followed then.
        """
        if self.current is not None:
            self.current.flush()
            self.current.save()
        self.executions.fail_submissions(Unavailable("the gateway is stopping"))
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
            self.channels = self.executions.channels = None

    # -- requests -----------------------------------------------------------------------------

    async def register_setup(self, parts: list[wire.SetupPart], timeout: float) -> bool:
        """Make `parts` this kernel's setup, run now (and after every restart) unless they
        already ran in this process; return whether they ran now."""
        await self.settle()
        if self.phase != "ready" or self.channels is None:
            raise Unavailable(f"the kernel is {self.phase}; try again when it is ready")
        return await self.setup.register(parts, self.channels, timeout)

    async def settle(self) -> None:
        """Return once a start or restart in progress has ended (or START_TIMEOUT passed)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._settled.wait(), START_TIMEOUT)

    async def submit(self, code: str, client: str | None = None) -> ExecutionRecord:
        """Start `code` and return its record once the kernel has begun running it; `client`
        says who sent it (a conversation, the CLI), as the monitor shows it."""
        await self.settle()  # a start or restart takes seconds: wait rather than refuse
        if self.phase != "ready" or self.channels is None:
            raise Unavailable(f"the kernel is {self.phase}; try again when it is ready")
        if self.setup.running:
            parts = self.setup.model()["parts"]
            raise Busy(
                f"the kernel is still running its setup ({', '.join(parts)}); "
                "try again when it has finished",
                running=None,
                setup=parts,
            )
        await self.executions.refuse_if_busy(START_TIMEOUT)
        self.store.check_writable()  # never run a cell whose record cannot be kept
        msg_id, reply = self.channels.send_cell(cell_content(code))
        future = self.executions.expect(msg_id, reply, client)
        try:
            return await asyncio.wait_for(asyncio.shield(future), START_TIMEOUT)
        except asyncio.TimeoutError:
            raise Unavailable(
                f"the kernel did not start the cell within {START_TIMEOUT:.0f} s; "
                "it may be busy with a request from another client"
            ) from None

    async def interrupt(self) -> ExecutionRecord:
        """Interrupt the running execution and return its record."""
        record = self.current
        if record is None:
            raise Conflict("nothing is running on this kernel", running=None)
        record.meta["interrupt_requested"] = time.time()
        await self.km.interrupt_kernel()
        if record.meta["interrupt_requested"] - record.meta["started"] < EARLY_INTERRUPT:
            self._spawn(self._repeat_interrupt(record))
        return record

    async def _repeat_interrupt(self, record: ExecutionRecord) -> None:
        """Send SIGINT again while the cell runs on with no sign of the first one.

        Output since the interrupt is such a sign: the cell's code runs, and may be handling
        the KeyboardInterrupt, which a second one would break.
        """
        for _ in range(INTERRUPT_REPEATS):
            await record.wait(INTERRUPT_RECHECK)
            if record.state != "running" or record.meta["error"] is not None:
                return
            if self.current is not record or self.phase != "ready":
                return
            if record.last_output > record.meta["interrupt_requested"]:
                return
            self.log.info(
                "Execution %s ran on after an interrupt; interrupting again", record.number
            )
            await self.km.interrupt_kernel()

    def answer_input(self, record: ExecutionRecord, value: str) -> None:
        """Send `value` as the reply to the pending input() of `record`."""
        self.executions.answer_input(record, value)

    def _on_iopub(self, msg: Message) -> None:
        self.km.parent.note_activity(self.km, msg)
        if msg["header"]["msg_type"] == "status":
            self.execution_state = msg["content"].get("execution_state", self.execution_state)
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
        if self.current is not None:
            return "awaiting_input" if self.current.state == "awaiting_input" else "busy"
        return "idle"

    def model(self) -> Kernel:
        """Return the kernel's wire form: what its records know, plus its live state."""
        model = self.store.model()
        model["state"] = self.state()
        model["alive"] = self.phase not in ("dead", "gone")
        model["current_execution"] = self.current.number if self.current else None
        model["last_activity"] = self.last_activity
        model["connections"] = self.holders + self.km.parent.connections(self.id)
        model["holders"] = self.holders
        model["held_by"] = list(self.held_by)
        model["ended"] = None
        model["end_reason"] = None
        model["setup"] = self.setup.model()
        return model
