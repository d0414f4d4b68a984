"""One kernel's executions as its messages tell them: IOPub and stdin become its records.

The tracker knows the running execution, recent ones by msg_id (late output still finds its
record), cells submitted but not yet started, and pending input() requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from loomgate.gateway.errors import Busy, Conflict
from loomgate.gateway.events import EventBus
from loomgate.gateway.kernels.channels import KernelChannels, Message
from loomgate.gateway.kernels.messages import seed_content
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.shared.wire import InputRequest

OUTPUT_EVENT_INTERVAL = 0.1
RECENT_RECORDS = 16  # finished records still matched to late IOPub output by msg_id
# How long a cell's idle status (IOPub) may wait for its execute_reply (shell), which ipykernel
# sends first but which travels on another socket.
REPLY_GRACE = 0.5


@dataclass
class Submission:
    """A cell this gateway sent: its record once the kernel starts it, and who sent it."""

    record: asyncio.Future[ExecutionRecord]
    client: str | None


class ExecutionTracker:
    """The executions of one kernel, built from the messages its channels deliver."""

    def __init__(self, store: RecordStore, events: EventBus) -> None:
        self.store = store
        self.events = events
        self.channels: KernelChannels | None = None
        self.implementation = ""
        self.current: ExecutionRecord | None = None
        self.last_activity = time.time()
        self._recent: OrderedDict[str, ExecutionRecord] = OrderedDict()
        self._submissions: dict[str, Submission] = {}  # our cells not started yet, by msg_id
        self._replies: dict[str, asyncio.Future[Message]] = {}  # our cells' execute_replies
        self._settling: set[asyncio.Task[None]] = set()
        self._input_requests: dict[int, Message] = {}
        self._output_events: dict[int, asyncio.TimerHandle] = {}
        self._early_input: dict[str, Message] = {}
        self._reseed_after: int | None = None

    @property
    def kernel_id(self) -> str:
        """Return the id of the kernel these executions run on."""
        return self.store.kernel_id

    def expect(
        self, msg_id: str, reply: asyncio.Future[Message], client: str | None = None
    ) -> asyncio.Future[ExecutionRecord]:
        """Return the future record of the cell sent as `msg_id` (set when it starts); `reply`
        is the future of its execute_reply."""
        self._replies[msg_id] = reply
        future: asyncio.Future[ExecutionRecord] = asyncio.get_running_loop().create_future()
        self._submissions[msg_id] = Submission(future, client)
        return future

    def follow(self, record: ExecutionRecord) -> None:
        """Follow an execution an earlier gateway saw start (its kernel was taken back)."""
        self.current = record
        self._recent[record.msg_id] = record
        if record.state == "awaiting_input":
            self._input_requests[record.number] = {}  # ipykernel takes any input_reply

    async def refuse_if_busy(self, start_timeout: float) -> None:
        """Raise Busy, naming the running execution, if a cell runs or is starting.

        A cell another client just sent has no number until the kernel starts it: the refusal
        waits for that (a few ms, at most `start_timeout`), so that it can name it.
        """
        if self.current is None and self._submissions:
            starting = next(iter(self._submissions.values())).record
            with contextlib.suppress(Exception):  # it never started: refused without a number
                await asyncio.wait_for(asyncio.shield(starting), start_timeout)
        if self.current is not None and self.channels is not None:
            self.channels.catch_up()  # an idle received already ends the running cell first
        if self.current is not None:
            number = self.current.number
            raise Busy(
                f"kernel is busy running execution {number}; wait for it, or interrupt it",
                running=number,
            )
        if self._submissions:
            raise Busy("kernel is busy starting another cell; try again in a moment", running=None)

    def fail_submissions(self, error: Exception) -> None:
        """Fail every cell sent but not yet started with `error`."""
        for submission in self._submissions.values():
            if not submission.record.done():
                submission.record.set_exception(error)
        self._submissions.clear()

    def answer_input(self, record: ExecutionRecord, value: str) -> None:
        """Send `value` as the reply to the pending input() of `record`."""
        request = self._input_requests.pop(record.number, None)
        if request is None or record.state != "awaiting_input" or self.channels is None:
            raise Conflict(
                f"execution {record.number} is not waiting for input",
                state=record.state,
                number=record.number,
            )
        self.channels.send_stdin("input_reply", {"value": value}, parent=request)
        record.set_state("running", input=None)
        self.publish_execution(record)

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
        info = InputRequest(
            prompt=content.get("prompt", ""), password=bool(content.get("password"))
        )
        record.set_state("awaiting_input", input=info)
        self.publish_execution(record)

    def on_iopub(self, msg: Message) -> None:
        """Turn an IOPub message into its record: a start, output, or the end (idle)."""
        msg_type = msg["header"]["msg_type"]
        parent_id = msg["parent_header"].get("msg_id", "")
        content = msg["content"]
        self.last_activity = time.time()
        if msg_type == "status":
            record = self._recent.get(parent_id)
            idle = content.get("execution_state") == "idle"
            if idle and record is not None and not record.final:
                error = record.meta["error"]
                if error is None and record.meta.get("interrupt_requested"):
                    self._settle_interrupted(record)
                elif error is None:
                    self.finish(record, "completed")
                elif error["name"] == "KeyboardInterrupt":
                    self.finish(record, "interrupted")
                else:
                    self.finish(record, "error")
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
        if self.implementation == "ipython" and (record.number != reported or not code.strip()):
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
        self.publish_execution(record)
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

        task = asyncio.get_running_loop().create_task(settle_after_reply())
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    def finish(self, record: ExecutionRecord, state: str, **details: Any) -> None:
        """End `record` in `state`, publish it, and put IPython's counter back if needed."""
        self._replies.pop(record.msg_id, None)
        record.set_state(state, **details)  # type: ignore[arg-type]
        self._input_requests.pop(record.number, None)
        if self.current is record:
            self.current = None
        self.last_activity = time.time()
        pending_output = self._output_events.pop(record.number, None)
        if pending_output is not None:
            pending_output.cancel()
        if self.events.has_subscribers(self.kernel_id):
            # After the waiting reply, which the wake-up in set_state has queued first.
            asyncio.get_running_loop().call_soon(self._publish_end, record, pending_output)
        if self._reseed_after == record.number and self.channels is not None and state != "died":
            self._reseed_after = None
            # Sent at once on our shell socket, so the kernel runs it before any later cell.
            self.channels.send_shell("execute_request", seed_content(record.number + 1))

    def _publish_end(
        self, record: ExecutionRecord, pending_output: asyncio.TimerHandle | None
    ) -> None:
        if pending_output is not None:
            self._publish_output(record)
        self.publish_execution(record)

    def publish_execution(self, record: ExecutionRecord) -> None:
        """Tell event listeners of the execution's new state."""
        if self.events.has_subscribers(self.kernel_id):
            self.events.execution(self.kernel_id, record.summary())

    def _schedule_output_event(self, record: ExecutionRecord) -> None:
        if not self.events.has_subscribers(self.kernel_id) or record.number in self._output_events:
            return

        def publish() -> None:
            self._output_events.pop(record.number, None)
            self._publish_output(record)

        loop = asyncio.get_running_loop()
        self._output_events[record.number] = loop.call_later(OUTPUT_EVENT_INTERVAL, publish)

    def _publish_output(self, record: ExecutionRecord) -> None:
        log = record.log("combined")
        tail = log.tail(1)
        self.events.output(self.kernel_id, record.number, log.total, tail[0].text if tail else "")


def replied_ok(reply: asyncio.Future[Message]) -> bool:
    """Return whether an execute_reply has arrived and says `ok`."""
    return reply.done() and not reply.cancelled() and reply.result()["content"]["status"] == "ok"
