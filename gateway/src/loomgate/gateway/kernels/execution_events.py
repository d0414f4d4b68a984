"""What listeners of one kernel's events hear of its executions: each change of state at once,
and its output as a line count and last line, at most once per OUTPUT_EVENT_INTERVAL."""

from __future__ import annotations

import asyncio

from loomgate.gateway.events import EventBus
from loomgate.gateway.records.record import ExecutionRecord

OUTPUT_EVENT_INTERVAL = 0.1


class ExecutionEvents:
    """The execution and output events of kernel `kernel_id`, published on `events` (nothing is
    made while the kernel has no listener)."""

    def __init__(self, events: EventBus, kernel_id: str) -> None:
        self.events = events
        self.kernel_id = kernel_id
        self._output_due: dict[int, asyncio.TimerHandle] = {}  # by execution number

    def execution(self, record: ExecutionRecord) -> None:
        """Tell listeners of the execution's new state."""
        if self.events.has_subscribers(self.kernel_id):
            self.events.execution(self.kernel_id, record.summary())

    def output(self, record: ExecutionRecord) -> None:
        """Tell listeners of the execution's new output, once the interval is over."""
        if not self.events.has_subscribers(self.kernel_id) or record.number in self._output_due:
            return

        def publish() -> None:
            self._output_due.pop(record.number, None)
            self._publish_output(record)

        loop = asyncio.get_running_loop()
        self._output_due[record.number] = loop.call_later(OUTPUT_EVENT_INTERVAL, publish)

    def ended(self, record: ExecutionRecord) -> None:
        """Tell listeners of the execution's end, its output not yet told first; after the
        callbacks already queued (a waiting reply, which the record's wake-up has queued)."""
        pending = self._output_due.pop(record.number, None)
        if pending is not None:
            pending.cancel()
        if self.events.has_subscribers(self.kernel_id):
            asyncio.get_running_loop().call_soon(self._publish_end, record, pending is not None)

    def _publish_end(self, record: ExecutionRecord, output_due: bool) -> None:
        if output_due:
            self._publish_output(record)
        self.execution(record)

    def _publish_output(self, record: ExecutionRecord) -> None:
        log = record.log("combined")
        tail = log.tail(1)
        self.events.output(self.kernel_id, record.number, log.total, tail[0].text if tail else "")
