"""One live kernel as loomgate sees it: its channels, its running execution, its records."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal

from loomgate.gateway.errors import Busy, Conflict, Unavailable
from loomgate.gateway.kernels.channels import KernelChannels, Message
from loomgate.gateway.kernels.messages import cell_content, seed_content
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.shared.wire import Kernel, KernelState

if TYPE_CHECKING:
    from loomgate.gateway.events import EventBus

# Where the process is in its life; every phase but `ready` is also the kernel's wire state.
Phase = Literal["starting", "ready", "restarting", "dead", "gone"]
CONFIRM_TIMEOUT = 60.0
START_TIMEOUT = 30.0
OUTPUT_EVENT_INTERVAL = 0.1
RECENT_RECORDS = 16  # finished records still matched to late IOPub output by msg_id
# ipykernel ignores a SIGINT that lands while it is still setting a cell up; an interrupt sent
# this soon after the cell started is repeated until the cell ends (at most a few times).
EARLY_INTERRUPT = 0.5
INTERRUPT_RECHECK = 0.5
INTERRUPT_REPEATS = 5


def exit_reason(returncode: int | None) -> str:
    """Return a sentence saying how a kernel process ended."""
    if returncode is None:
        return "the kernel process stopped responding"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the kernel process was killed by {name}"
    return f"the kernel process exited with code {returncode}"


class LoomKernel:
    """A kernel process plus loomgate's bookkeeping: numbering, records, busy state, input."""

    def __init__(self, km: Any, store: RecordStore, events: EventBus, log: logging.Logger) -> None:
        self.km = km
        self.store = store
        self.events = events
        self.log = log
        self.phase: Phase = "starting"
        self.execution_state = "starting"  # the kernel's own busy/idle
        self.implementation = ""
        self.channels: KernelChannels | None = None
        self.current: ExecutionRecord | None = None
        self.holders = 0
        self.last_activity = time.time()
        self._recent: OrderedDict[str, ExecutionRecord] = OrderedDict()
        self._submissions: dict[str, asyncio.Future[ExecutionRecord]] = {}
        self._input_requests: dict[int, Message] = {}
        self._died_record: ExecutionRecord | None = None
        self._output_events: dict[int, asyncio.TimerHandle] = {}
        self._early_input: dict[str, Message] = {}
        self._reseed_after: int | None = None
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

    # -- process lifecycle (called by the kernel manager) -------------------------------------

    async def process_started(self) -> None:
        """Attach fresh channels to a just-launched process, prove IOPub live, seed its counter."""
        self.close_channels()
        self.channels = KernelChannels(self.km, on_iopub=self._on_iopub, on_stdin=self._on_stdin)
        reply = await self.channels.confirm(CONFIRM_TIMEOUT, alive=self._process_running)
        self.implementation = str(reply["content"].get("implementation", ""))
        self.store.meta["implementation"] = self.implementation
        if self.implementation == "ipython" and self.store.last_number > 0:
            await self._seed_counter(self.store.last_number + 1)
        if self._died_record is not None:
            died = dict(self._died_record.meta["died"], restarted=True)
            self._died_record.amend(died=died, note="the kernel was restarted; its state is gone")
            self._died_record = None
        self._set_phase("ready")
        self.execution_state = self.km.execution_state = "idle"
        self.events.kernel(self.id, "ready", self.model())

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
            self._finish(self.current, "killed", note=note)
        self._fail_submissions(Unavailable("the kernel stopped before the cell started"))
        self.close_channels()

    def process_died(self, *, restarting: bool) -> None:
        """Mark the running execution `died` (the process exited on its own)."""
        returncode = self.km.provisioner.process.poll() if self._has_process() else None
        reason = exit_reason(returncode)
        self.log.warning("Kernel %s died: %s", self.id, reason)
        if self.current is not None:
            self._died_record = self.current
            note = "the kernel is being restarted" if restarting else None
            self._finish(
                self.current, "died", died={"reason": reason, "restarted": False}, note=note
            )
        if not restarting and self._died_record is not None:
            self._died_record.amend(note="the kernel could not be restarted and is dead")
            self._died_record = None
        self._fail_submissions(Unavailable(f"the kernel died: {reason}"))
        phase: Literal["restarting", "dead"] = "restarting" if restarting else "dead"
        self._set_phase(phase)
        self.events.kernel(self.id, phase, self.model(), reason)

    def process_gone(self) -> None:
        """Note that the kernel has been shut down for good."""
        self._set_phase("gone")

    def _set_phase(self, phase: Phase) -> None:
        self.phase = phase
        if phase in ("starting", "restarting"):
            self._settled.clear()
        else:
            self._settled.set()

    def _has_process(self) -> bool:
        provisioner = getattr(self.km, "provisioner", None)
        return getattr(provisioner, "process", None) is not None

    def _process_running(self) -> bool:
        return not self._has_process() or self.km.provisioner.process.poll() is None

    def close_channels(self) -> None:
        """Close the gateway's sockets to the kernel."""
        if self.channels is not None:
            self.channels.close()
            self.channels = None

    def _fail_submissions(self, error: Exception) -> None:
        for future in self._submissions.values():
            if not future.done():
                future.set_exception(error)
        self._submissions.clear()

    # -- requests -----------------------------------------------------------------------------

    async def submit(self, code: str) -> ExecutionRecord:
        """Start `code` and return its record once the kernel has begun running it."""
        if self.phase in ("starting", "restarting"):
            # A start or restart takes seconds: wait for it rather than refuse the cell.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._settled.wait(), START_TIMEOUT)
        if self.phase != "ready" or self.channels is None:
            raise Unavailable(f"the kernel is {self.phase}; try again when it is ready")
        self._refuse_if_busy()
        self.store.check_writable()  # never run a cell whose record cannot be kept
        msg = self.channels.send_shell("execute_request", cell_content(code))
        msg_id = msg["header"]["msg_id"]
        future = self._submissions[msg_id] = asyncio.get_running_loop().create_future()
        try:
            return await asyncio.wait_for(asyncio.shield(future), START_TIMEOUT)
        except asyncio.TimeoutError:
            raise Unavailable(
                f"the kernel did not start the cell within {START_TIMEOUT:.0f} s; "
                "it may be busy with a request from another client"
            ) from None

    def _refuse_if_busy(self) -> None:
        if self.current is not None:
            number = self.current.number
            raise Busy(
                f"kernel is busy running execution {number}; wait for it, or interrupt it",
                running=number,
            )
        if self._submissions:
            raise Busy("kernel is busy starting another cell; try again in a moment", running=None)

    async def interrupt(self) -> ExecutionRecord:
        """Interrupt the running execution and return its record."""
        record = self.current
        if record is None:
            raise Conflict("nothing is running on this kernel", running=None)
        record.meta["interrupt_requested"] = time.time()
        await self.km.interrupt_kernel()
        if record.meta["interrupt_requested"] - record.meta["started"] < EARLY_INTERRUPT:
            task = asyncio.get_running_loop().create_task(self._repeat_interrupt(record))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return record

    async def _repeat_interrupt(self, record: ExecutionRecord) -> None:
        """Send SIGINT again while the cell runs on with no sign of the first one."""
        for _ in range(INTERRUPT_REPEATS):
            await record.wait(INTERRUPT_RECHECK)
            if record.state != "running" or record.meta["error"] is not None:
                return
            if self.current is not record or self.phase != "ready":
                return
            self.log.info(
                "Execution %s ran on after an interrupt; interrupting again", record.number
            )
            await self.km.interrupt_kernel()

    def answer_input(self, record: ExecutionRecord, value: str) -> None:
        """Send `value` as the reply to the pending input() of `record`."""
        request = self._input_requests.pop(record.number, None)
        if request is None or record.state != "awaiting_input" or self.channels is None:
            raise Conflict(
                f"execution {record.number} is not waiting for input", state=record.state
            )
        self.channels.send_stdin("input_reply", {"value": value}, parent=request)
        record.set_state("running", input=None)
        self._publish_execution(record)

    # -- messages from the kernel -------------------------------------------------------------

    def _on_stdin(self, msg: Message) -> None:
        if msg["header"]["msg_type"] != "input_request":
            return
        msg_id = msg["parent_header"].get("msg_id", "")
        record = self._recent.get(msg_id)
        if record is None and msg_id in self._submissions:
            # stdin and IOPub are separate sockets: the request can overtake execute_input.
            self._early_input[msg_id] = msg
            return
        if record is not None and not record.final:
            self._await_input(record, msg)

    def _await_input(self, record: ExecutionRecord, msg: Message) -> None:
        self._input_requests[record.number] = msg
        content = msg["content"]
        info = {"prompt": content.get("prompt", ""), "password": bool(content.get("password"))}
        record.set_state("awaiting_input", input=info)
        self._publish_execution(record)

    def _on_iopub(self, msg: Message) -> None:
        msg_type = msg["header"]["msg_type"]
        parent_id = msg["parent_header"].get("msg_id", "")
        content = msg["content"]
        self.last_activity = time.time()
        self.km.parent.note_activity(self.km, msg)
        if msg_type == "status":
            self.execution_state = content.get("execution_state", self.execution_state)
            record = self._recent.get(parent_id)
            if self.execution_state == "idle" and record is not None and not record.final:
                error = record.meta["error"]
                if error is None and record.meta.get("interrupt_requested"):
                    # SIGINT that lands between execute_input and the cell's code is caught by
                    # ipykernel itself: no traceback, no reply, but the cell did not run on.
                    note = "interrupted before the cell's code could raise KeyboardInterrupt"
                    self._finish(record, "interrupted", note=note)
                elif error is None:
                    self._finish(record, "completed")
                elif error["name"] == "KeyboardInterrupt":
                    self._finish(record, "interrupted")
                else:
                    self._finish(record, "error")
            return
        if msg_type == "execute_input":
            self._start_record(parent_id, content)
            return
        record = self._recent.get(parent_id)
        if record is None:
            return
        if msg_type == "stream":
            record.write_stream(content.get("name", "stdout"), content.get("text", ""))
        elif msg_type in ("execute_result", "display_data", "update_display_data"):
            record.write_bundle(
                content.get("data", {}),
                content.get("metadata", {}),
                result=msg_type == "execute_result",
            )
        elif msg_type == "error":
            record.write_error(
                content.get("ename", ""), content.get("evalue", ""), content.get("traceback", [])
            )
        else:
            return
        self._schedule_output_event(record)

    def _start_record(self, msg_id: str, content: dict[str, Any]) -> None:
        if self.current is not None and not self.current.final:
            self._finish(self.current, "completed", note="superseded before its end was seen")
        submission = self._submissions.pop(msg_id, None)
        reported = int(content.get("execution_count") or 0)
        code = str(content.get("code", ""))
        record = self.store.new_record(
            number=reported,
            msg_id=msg_id,
            code=code,
            source="loomgate" if submission is not None else "other",
        )
        if self.implementation == "ipython" and (record.number != reported or not code.strip()):
            # IPython does not count a blank cell (nor another client's store_history=False
            # one, seen here as a number it reports twice): put its counter back in step
            # with ours once this cell ends.
            self._reseed_after = record.number
        self.current = record
        self._recent[msg_id] = record
        while len(self._recent) > RECENT_RECORDS:
            self._recent.popitem(last=False)
        if submission is not None and not submission.done():
            submission.set_result(record)
        record.save_soon()  # after the waiting submitter has been woken
        self._publish_execution(record)
        early_input = self._early_input.pop(msg_id, None)
        if early_input is not None:
            self._await_input(record, early_input)

    def _finish(self, record: ExecutionRecord, state: str, **details: Any) -> None:
        record.set_state(state, **details)  # type: ignore[arg-type]
        self._input_requests.pop(record.number, None)
        if self.current is record:
            self.current = None
        self.last_activity = time.time()
        pending_output = self._output_events.pop(record.number, None)
        if pending_output is not None:
            pending_output.cancel()
            self._publish_output(record)
        self._publish_execution(record)
        if self._reseed_after == record.number and self.channels is not None and state != "died":
            self._reseed_after = None
            # Sent at once on our shell socket, so the kernel runs it before any later cell.
            self.channels.send_shell("execute_request", seed_content(record.number + 1))

    def _publish_execution(self, record: ExecutionRecord) -> None:
        if self.events.has_subscribers(self.id):
            self.events.execution(self.id, record.summary())

    def _schedule_output_event(self, record: ExecutionRecord) -> None:
        if not self.events.has_subscribers(self.id) or record.number in self._output_events:
            return

        def publish() -> None:
            self._output_events.pop(record.number, None)
            self._publish_output(record)

        loop = asyncio.get_running_loop()
        self._output_events[record.number] = loop.call_later(OUTPUT_EVENT_INTERVAL, publish)

    def _publish_output(self, record: ExecutionRecord) -> None:
        log = record.log("combined")
        tail = log.tail(1)
        self.events.output(self.id, record.number, log.total, tail[0].text if tail else "")

    # -- wire ---------------------------------------------------------------------------------

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
        model["ended"] = None
        return model
