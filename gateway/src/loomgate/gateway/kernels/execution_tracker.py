"""A cell's life on one kernel: admitting it (the busy rule), sending it, following it through
IOPub and stdin into its record, interrupting it, answering its input(), and ending it when the
process stops, dies or is left.

The tracker knows the running execution, recent ones by msg_id (late output still finds its
record), cells submitted but not yet started, and pending input() requests.

Longer than 400 lines: admitting, following, interrupting and ending a cell all read and change
the same running record, submissions and input requests; split, they would be joined again by
pass-throughs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from loomgate.gateway.errors import Busy, Conflict, Unavailable
from loomgate.gateway.events import EventBus
from loomgate.gateway.kernels.execution_events import ExecutionEvents
from loomgate.gateway.kernels.kernel_channels import KernelChannels, Message, replied_ok
from loomgate.gateway.kernels.kernel_kind import KernelKind
from loomgate.gateway.kernels.late_output import SETTLE_LIMIT, LateOutput
from loomgate.gateway.kernels.messages import cell_content, seed_content
from loomgate.gateway.kernels.missed_end import MISSED_END, check_after_reply
from loomgate.gateway.kernels.setup import KernelSetup
from loomgate.gateway.process_end import Ending
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.records.terminal_text import normalized_text
from loomgate.shared import wire
from loomgate.shared.wire import Death, ExecutionState, InputRequest

RECENT_RECORDS = 16  # finished records still matched to late IOPub output by msg_id
# How long a cell's idle status (IOPub) may wait for its execute_reply (shell), which ipykernel
# sends first but which travels on another socket.
REPLY_GRACE = 0.5
# How long a cell may take to start: the kernel may be finishing a request of another client.
CELL_START_TIMEOUT = 30.0
# How long another client's running cell may take to end: its idle reaches that client first.
OTHER_END_GRACE = 0.5
# ipykernel ignores a SIGINT that lands while it is still setting a cell up; an interrupt sent
# this soon after the cell started is repeated until the cell ends (at most a few times).
EARLY_INTERRUPT = 0.5
INTERRUPT_RECHECK = 0.5
INTERRUPT_REPEATS = 5
# Requests that ask about a kernel rather than use it (a take back's and a client's probes): the
# IOPub status they cause is not the kernel's activity.
PROBES = frozenset({"kernel_info_request", "comm_info_request"})
# A cell the kernel was sent but died with before announcing it (its record says so).
UNSEEN_START = "the kernel died before the cell was seen to start; it may have begun"


class KernelProcess(Protocol):
    """What the tracker asks of its kernel's process (a LoomKernel): where it is in its life,
    its channels while they are open, its kind, SIGINT, and its sandbox's facts."""

    @property
    def phase(self) -> str:
        """Return `ready`, or why the process takes no cells (starting, restarting, dead, gone)."""

    @property
    def channels(self) -> KernelChannels | None:
        """Return the open channels to the process (None while there are none)."""

    @property
    def kind(self) -> KernelKind:
        """Return the kernel's language and implementation, from its kernel_info."""

    async def settle(self) -> None:
        """Return once a start or restart in progress has ended (or it took too long)."""

    async def signal_interrupt(self) -> None:
        """Send the process an interrupt (through its kernel manager)."""

    def sandbox_failure(
        self, record: ExecutionRecord, died: wire.Death | None
    ) -> wire.SandboxFailure | None:
        """Return the sandbox rule an ending cell ran into (None: none, or not confined)."""


@dataclass
class Submission:
    """A cell this gateway sent: its record once the kernel starts it, and who sent it."""

    record: asyncio.Future[ExecutionRecord]
    client: str | None
    code: str


class ExecutionTracker:
    """The executions of one kernel: what may start, what runs, and how each one ended."""

    def __init__(
        self,
        process: KernelProcess,
        store: RecordStore,
        setup: KernelSetup,
        events: EventBus,
        log: logging.Logger,
    ) -> None:
        self.process = process
        self.store = store
        self.setup = setup
        self.news = ExecutionEvents(events, store.kernel_id)
        self.late = LateOutput(store, log)  # cells whose output comes after their idle
        self.log = log
        self.current: ExecutionRecord | None = None
        self.last_activity = time.time()
        self._recent: OrderedDict[str, ExecutionRecord] = OrderedDict()
        self._submissions: dict[str, Submission] = {}  # our cells not started yet, by msg_id
        self._replies: dict[str, asyncio.Future[Message]] = {}  # our cells' execute_replies
        self._background: set[asyncio.Task[None]] = set()
        self._input_requests: dict[int, Message] = {}
        self._early_input: dict[str, Message] = {}
        self._reseed_after: int | None = None
        self._died: ExecutionRecord | None = None  # ran when the process died; told of a restart
        self._died_before_seen = False  # whether it was never seen starting (it may not have begun)

    @property
    def kernel_id(self) -> str:
        """Return the id of the kernel these executions run on."""
        return self.store.kernel_id

    # -- starting a cell ----------------------------------------------------------------------

    async def admit(self) -> KernelChannels:
        """Return the channels a new cell may be sent on now, or raise why it may not (the busy
        rule). In order:

        1. a start or restart in progress is waited for (it takes seconds), not refused;
        2. a process that is not ready (starting, restarting, dead, gone) refuses: Unavailable;
        3. a setup still running refuses: Busy, naming its parts (`setup`, no `running`);
        4. a cell another client just sent, which has no number until the kernel starts it, is
           waited for (a few ms, at most CELL_START_TIMEOUT) so that the refusal can name it;
        5. IOPub already received is handled first (another client's cell that client saw
           start, or end, has on ours), and another client's running cell gets
           OTHER_END_GRACE to end;
        6. a running cell refuses: Busy, naming its number (`running`);
        7. a cell sent and not yet started refuses: Busy (`running` None);
        8. records that cannot be kept refuse (StorageFailed): no cell runs unrecorded;
        9. a process no longer ready after the wait of 4 refuses as in 2.
        """
        await self.process.settle()
        self._ready_channels()
        if self.setup.running:
            parts = self.setup.model()["parts"]
            raise Busy(
                f"the kernel is still running its setup ({', '.join(parts)}); "
                "try again when it has finished",
                running=None,
                setup=parts,
            )
        if self.current is None and self._submissions:
            starting = next(iter(self._submissions.values())).record
            with contextlib.suppress(Exception):  # it never started: refused without a number
                await asyncio.wait_for(asyncio.shield(starting), CELL_START_TIMEOUT)
        if self.process.channels is not None:
            self.process.channels.catch_up()
        if self.current is not None and self.current.meta["source"] == "other":
            await self.current.wait(OTHER_END_GRACE)
        if self.current is not None and self.late.settling(self.current):
            await self.current.wait(SETTLE_LIMIT)  # idle: the rest of its output comes
        if self.current is not None:
            number = self.current.number
            raise Busy(
                f"kernel is busy running execution {number}; wait for it, or interrupt it",
                running=number,
            )
        if self._submissions:
            raise Busy("kernel is busy starting another cell; try again in a moment", running=None)
        self.store.check_writable()
        return self._ready_channels()

    def _ready_channels(self) -> KernelChannels:
        """Return the process's channels (Unavailable, saying why, if it is not ready)."""
        channels = self.process.channels
        if self.process.phase != "ready" or channels is None:
            raise Unavailable(f"the kernel is {self.process.phase}; try again when it is ready")
        return channels

    async def submit(self, code: str, client: str | None = None) -> ExecutionRecord:
        """Start `code` if `admit` lets it, and return its record once the kernel has begun
        running it; `client` says who sent it (a conversation, the CLI), as the monitor shows."""
        channels = await self.admit()
        msg = channels.cell_message(cell_content(code))
        msg_id = msg["header"]["msg_id"]
        # Journalled before it is sent: a gateway killed before the kernel announces the cell
        # leaves its code and sender for the next one (residency/unseen_cells.py).
        self.store.journal_sent(msg_id, code, client)
        reply = channels.send_cell(msg)
        self._replies[msg_id] = reply
        reply.add_done_callback(
            functools.partial(
                check_after_reply,
                msg_id,
                cells=self,
                channels=lambda: self.process.channels,
                spawn=self._spawn,
            )
        )
        future: asyncio.Future[ExecutionRecord] = asyncio.get_running_loop().create_future()
        self._submissions[msg_id] = Submission(future, client, code)
        try:
            return await asyncio.wait_for(asyncio.shield(future), CELL_START_TIMEOUT)
        except asyncio.TimeoutError:
            raise Unavailable(
                f"the kernel did not start the cell within {CELL_START_TIMEOUT:.0f} s; "
                "it may be busy with a request from another client"
            ) from None

    def _fail_submissions(self, error: Exception) -> None:
        """Fail every cell sent but not yet started with `error`."""
        for submission in self._submissions.values():
            if not submission.record.done():
                submission.record.set_exception(error)
        self._submissions.clear()

    # -- interrupting, and answering input ----------------------------------------------------

    async def interrupt(self, expected: int | None = None) -> ExecutionRecord:
        """Interrupt the running execution (only if it is `expected`, when given: checked after
        the IOPub already received, no await before the signal) and return its record; one sent
        within EARLY_INTERRUPT of the cell's start is repeated while the cell runs on unaffected.

        A cell waiting in input() has its request withdrawn: it is `running` again until the
        KeyboardInterrupt ends it, so a long poll waits for that end, as after any interrupt
        (a cell that catches it and asks again is `awaiting_input` again)."""
        if expected is not None and (channels := self.process.channels) is not None:
            channels.catch_up()
        record = self.current
        if expected is not None and (record is None or record.number != expected):
            named = self.store.get(expected)
            raise Conflict(
                f"execution {expected} is not running; nothing was interrupted",
                running=record.number if record else None,
                number=expected,
                state=named.state if named else None,
            )
        if record is None:
            raise Conflict("nothing is running on this kernel", running=None)
        if not self.process.kind.interrupts:
            raise Conflict(
                f"this kernel ({self.process.kind.describe()}) cannot interrupt a running cell: "
                "an interrupt would end it; reset restarts it (its variables are lost)",
                running=record.number,
            )
        record.meta["interrupt_requested"] = time.time()
        request = self._input_requests.get(record.number)
        await self.process.signal_interrupt()
        waited = record.state == "awaiting_input"
        if waited and self._input_requests.get(record.number) is request:
            self._input_requests.pop(record.number, None)
            record.set_state("running", input=None)
            self.news.execution(record)
        # A cell in input() takes the signal where ipykernel waits for the answer: once is
        # enough, and a repeat would break its traceback's printing.
        early = record.meta["interrupt_requested"] - record.meta["started"] < EARLY_INTERRUPT
        if early and not waited:
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
            if self.current is not record or self.process.phase != "ready":
                return
            if record.last_output > record.meta["interrupt_requested"]:
                return
            self.log.info(
                "Execution %s ran on after an interrupt; interrupting again", record.number
            )
            await self.process.signal_interrupt()

    def answer_input(self, record: ExecutionRecord, value: str) -> None:
        """Send `value` as the reply to the pending input() of `record`."""
        request = self._input_requests.pop(record.number, None)
        channels = self.process.channels
        if request is None or record.state != "awaiting_input" or channels is None:
            raise Conflict(
                f"execution {record.number} is not waiting for input",
                state=record.state,
                number=record.number,
            )
        channels.send_stdin("input_reply", {"value": value}, parent=request)
        record.set_state("running", input=None)
        self.news.execution(record)

    # -- when the process stops, dies, is left, or is taken back ------------------------------

    def process_stopping(self, *, restart: bool) -> None:
        """End the running execution `killed` (a reset or stop) and fail cells not yet started."""
        if self.current is not None:
            note = "the kernel was reset" if restart else "the kernel was stopped"
            self.finish(self.current, "killed", note=note)
        self._fail_submissions(Unavailable("the kernel stopped before the cell started"))

    def process_died(self, ending: Ending, *, restarting: bool) -> None:
        """End the running execution `died` (the process exited on its own, as `ending` says) and
        note the death after it; its record is told later whether the restart brought the kernel
        back."""
        self._died_before_seen = self.current is None and bool(self._submissions)
        if self.current is not None:
            self._died = self.current
            note = "the kernel is being restarted" if restarting else None
            self.finish(self.current, "died", died=ending.death(restarted=False), note=note)
        elif self._submissions:
            self._died = self._died_unseen(ending, restarting=restarting)
        # After the cell the death ended has its number: a cell never seen starting gets it here.
        self.store.note_restart("died", ending.reason)
        if not restarting and self._died is not None:
            self._died.amend(note="the kernel could not be restarted and is dead")
            self._died = None
        self._fail_submissions(Unavailable(f"the kernel died: {ending.reason}"))

    def _died_unseen(self, ending: Ending, *, restarting: bool) -> ExecutionRecord:
        """Give the cell sent but not yet seen starting a record ended `died`: the kernel had
        it when it died, and may have begun it (no number without a record)."""
        msg_id, submission = next(iter(self._submissions.items()))
        del self._submissions[msg_id]
        record = self.store.new_record(
            number=0,
            msg_id=msg_id,
            code=submission.code,
            source="loomgate",
            client=submission.client,
        )
        self._recent[msg_id] = record
        note = f"{UNSEEN_START}; the kernel is being restarted" if restarting else UNSEEN_START
        self.finish(record, "died", died=ending.death(restarted=False), note=note)
        if not submission.record.done():
            submission.record.set_result(record)
        return record

    def process_restarted(self) -> None:
        """Tell the execution that died with the last process that the kernel was restarted."""
        if self._died is not None:
            died = self._died.meta["died"]
            assert died is not None  # set when the record died
            restarted: Death = {**died, "restarted": True}
            note = "the kernel was restarted; its state is gone"
            if self._died_before_seen:
                note = f"{UNSEEN_START}; {note}"
            self._died.amend(died=restarted, note=note)
            self._died = None

    def leave(self) -> None:
        """Keep the running execution's output so far on disk (a later gateway follows the rest),
        and fail cells not yet started: the gateway is stopping."""
        if self.current is not None:
            self.current.flush()
            self.current.save()
        self._fail_submissions(Unavailable("the gateway is stopping"))

    def follow_after_gap(self, record: ExecutionRecord) -> None:
        """Follow `record`, which ran while no gateway listened (its kernel was taken back, or its
        channels dropped): its output since then is noted as a gap; it is followed to its end,
        or ends `lost` if it ended unseen."""
        record.note_gap(until=time.time())
        self.current = record
        self._recent[record.msg_id] = record
        if record.state == "awaiting_input":
            self._input_requests[record.number] = {}  # ipykernel takes any input_reply
        self._spawn(self._settle_after_gap(record))

    async def _settle_after_gap(self, record: ExecutionRecord) -> None:
        """End `record` as `lost` if the kernel finished it while no gateway was listening."""
        channels = self.process.channels
        assert channels is not None
        with contextlib.suppress(asyncio.CancelledError):
            await channels.drain()
            if not record.final and self.current is record:
                note = "it ended while the gateway was down; how it ended is unknown"
                self.finish(record, "lost", note=note)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` in the background, kept referenced until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- what the kernel's messages say -------------------------------------------------------

    def on_stdin(self, msg: Message) -> None:
        """Note an input_request: its execution now waits for input."""
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
        # As output is: a prompt's escapes would reach the terminal of whoever answers it.
        prompt = normalized_text(str(content.get("prompt", "")))
        info = InputRequest(prompt=prompt, password=bool(content.get("password")))
        record.set_state("awaiting_input", input=info)
        self.news.execution(record)

    def on_iopub(self, msg: Message) -> None:
        """Turn an IOPub message into its record: a start, output, or the end (idle)."""
        msg_type = msg["header"]["msg_type"]
        parent_id = msg["parent_header"].get("msg_id", "")
        content = msg["content"]
        if msg["parent_header"].get("msg_type") not in PROBES:
            self.last_activity = time.time()
        if msg_type == "status":
            record = self._recent.get(parent_id)
            idle = content.get("execution_state") == "idle"
            if idle and record is not None and not record.final:
                if self.late.expected(self.process.kind):
                    channels = self.process.channels
                    relayed = channels is not None and not channels.local
                    self.late.settle(record, functools.partial(self._end, record), relayed=relayed)
                else:
                    self._end(record)
            return
        if msg_type == "execute_input":
            self._start_record(parent_id, content)
            return
        record = self._recent.get(parent_id)
        if record is None:
            return
        if not record.final:
            self._note_loss(record)
        if msg_type == "stream":
            record.write_stream(content.get("name", "stdout"), content.get("text", ""))
            if record.final and "sandbox_failure" not in record.meta:
                # A subprocess's stderr (os.system's) reaches IOPub after the cell's idle.
                failure = self.process.sandbox_failure(record, record.meta["died"])
                if failure is not None:
                    record.amend(sandbox_failure=failure)
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
        if record.final or self.late.settling(record):
            self.late.output(record, self.process.kind, functools.partial(self._end, record))
        self.news.output(record)

    def _end(self, record: ExecutionRecord, **details: Any) -> None:
        """End `record` as its error says (the kernel is idle after it)."""
        error = record.meta["error"]
        if error is None and record.meta.get("interrupt_requested"):
            self._settle_interrupted(record)
        elif error is None:
            self.finish(record, "completed", **details)
        elif error["name"] == "KeyboardInterrupt":
            self.finish(record, "interrupted", **details)
        else:
            self.finish(record, "error", **details)

    def ending_pending(self, msg_id: str) -> bool:
        """Return whether our cell `msg_id` is known and has not ended (nor is ending)."""
        record = self._recent.get(msg_id)
        if record is None:
            return msg_id in self._submissions
        return not (record.final or self.late.settling(record))

    def end_by_reply(self, msg_id: str, reply: Message) -> None:
        """End our cell `msg_id` as its `reply` says: its idle (or even its start) was lost."""
        record = self._recent.get(msg_id)
        submission = self._submissions.get(msg_id)
        if record is None and submission is not None:
            count = reply["content"].get("execution_count")
            self._start_record(msg_id, {"execution_count": count, "code": submission.code})
            record = self._recent.get(msg_id)
        if record is None or record.final:
            return
        content = reply["content"]
        if content.get("status") == "error" and record.meta["error"] is None:
            record.write_error(
                content.get("ename", ""), content.get("evalue", ""), content.get("traceback", [])
            )
        self._note_loss(record)  # found at the messages that followed its lost end
        self._end(record, note=MISSED_END)

    def _note_loss(self, record: ExecutionRecord) -> None:
        """Note on `record` what the kernel dropped, or the upstream held back, before now."""
        channels = self.process.channels
        if channels is None:
            return
        kept = self.process.kind.ipykernel and channels.local
        loss = channels.sequence.loss(kept)
        if loss is not None:
            record.note_dropped(*loss)

    def _start_record(self, msg_id: str, content: dict[str, Any]) -> None:
        if self.current is not None and not self.current.final:
            self.finish(self.current, "completed", note="superseded before its end was seen")
        submission = self._submissions.pop(msg_id, None)
        reported = int(content.get("execution_count") or 0)
        code = str(content.get("code", ""))
        record = self.store.new_record(
            number=reported,
            msg_id=msg_id,
            code=code,
            source="loomgate" if submission is not None else "other",
            client=submission.client if submission is not None else None,
        )
        if self.process.kind.ipykernel and (record.number != reported or not code.strip()):
            # IPython does not count a blank cell (nor another client's store_history=False
            # one, seen here as a number it reports twice): put its counter back in step
            # with ours once this cell ends.
            self._reseed_after = record.number
        self.current = record
        self._recent[msg_id] = record
        while len(self._recent) > RECENT_RECORDS:
            self._recent.popitem(last=False)
        if submission is not None and not submission.record.done():
            submission.record.set_result(record)
        record.save_soon()  # after the waiting submitter has been woken
        self.news.execution(record)
        early_input = self._early_input.pop(msg_id, None)
        if early_input is not None:
            self._await_input(record, early_input)

    def _settle_interrupted(self, record: ExecutionRecord) -> None:
        """End a cell that was interrupted yet raised nothing, as its execute_reply tells.

        A cell that caught the KeyboardInterrupt and ended well replies `ok`: completed. A
        SIGINT landing between execute_input and the cell's code is caught by ipykernel itself:
        no traceback, no reply, and the cell did not run on: interrupted.
        """
        reply = self._replies.get(record.msg_id)

        def settle() -> None:
            if record.final:
                return
            if reply is not None and replied_ok(reply):
                self.finish(record, "completed")
                return
            note = "interrupted before the cell's code could raise KeyboardInterrupt"
            self.finish(record, "interrupted", note=note)

        if reply is None or reply.done():
            settle()
            return

        async def settle_after_reply() -> None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(reply), REPLY_GRACE)
            settle()

        self._spawn(settle_after_reply())

    def finish(self, record: ExecutionRecord, state: ExecutionState, **details: Any) -> None:
        """End `record` in `state`, publish it, and put IPython's counter back if needed."""
        self._replies.pop(record.msg_id, None)
        self.late.forget(record)
        try:
            failure = self.process.sandbox_failure(record, details.get("died"))
        except Exception:  # the rule a cell ran into is a note: it never keeps the cell running
            self.log.exception(
                "Kernel %s: execution %s's sandbox rule not read", self.kernel_id, record.number
            )
            failure = None
        if failure is not None:
            details["sandbox_failure"] = failure
        record.set_state(state, **details)
        self._input_requests.pop(record.number, None)
        if self.current is record:
            self.current = None
        self.last_activity = time.time()
        self.news.ended(record)
        channels = self.process.channels
        if self._reseed_after == record.number and channels is not None and state != "died":
            self._reseed_after = None
            # Sent at once on our shell socket, so the kernel runs it before any later cell.
            channels.send_shell("execute_request", seed_content(record.number + 1))
