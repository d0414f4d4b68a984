"""The tool calls translators report, kept in memory (the most recent ones) for the monitor, and
how a report is checked; handlers/monitor.py is their endpoint."""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Mapping

from loomgate.gateway.errors import BadRequest
from loomgate.gateway.events import EventBus
from loomgate.shared.events import (
    TOOL_CALL_ARGUMENTS,
    TOOL_CALL_TEXT_KEPT,
    ToolCall,
    ToolCallReport,
    shortened,
)

MAX_REPORTS = 100  # tool calls in one report
KEPT = 2000  # tool calls kept; older ones are dropped (records keep what the cells did)
LABEL_CHARS = 200


class ToolCallLog:
    """The most recent tool calls, numbered in arrival order, published as they arrive."""

    def __init__(self, events: EventBus, kept: int = KEPT) -> None:
        self.events = events
        self.calls: deque[ToolCall] = deque(maxlen=kept)
        self._ids = itertools.count(1)

    def add(self, report: ToolCallReport) -> ToolCall:
        """Return `report` numbered, after keeping and publishing it."""
        call = ToolCall(id=next(self._ids), **report)
        self.calls.append(call)
        self.events.tool_call(call)
        return call

    def since(self, after: int, conversation: str | None, limit: int) -> list[ToolCall]:
        """Return up to `limit` of the newest calls numbered above `after`, oldest first."""
        calls = [
            call
            for call in self.calls
            if call["id"] > after and conversation in (None, call["conversation"])
        ]
        return calls[-limit:]


def checked(report: Mapping[str, object]) -> ToolCallReport:
    """Return a tool call report's fields, shortened; BadRequest naming what is wrong."""

    def text(name: str, limit: int = LABEL_CHARS) -> str:
        value = report.get(name)
        if not isinstance(value, str):
            raise BadRequest(f"{name} (a string) is required")
        return shortened(value, limit)

    def optional_text(name: str) -> str | None:
        return None if report.get(name) is None else text(name)

    def seconds(name: str) -> float:
        value = report.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise BadRequest(f"{name} (a number, 0 or more) is required")
        return float(value)

    arguments = report.get("arguments", {})
    if not isinstance(arguments, dict):
        raise BadRequest("arguments must be an object")
    error = report.get("error", False)
    if not isinstance(error, bool):
        raise BadRequest("error must be true or false")
    call = ToolCallReport(
        conversation=text("conversation"),
        tool=text("tool"),
        arguments={
            str(key)[:LABEL_CHARS]: shortened(
                value if isinstance(value, str) else repr(value), TOOL_CALL_TEXT_KEPT
            )
            for key, value in list(arguments.items())[:TOOL_CALL_ARGUMENTS]
        },
        summary=text("summary", TOOL_CALL_TEXT_KEPT),
        error=error,
        started=seconds("started") if "started" in report else time.time(),
        duration=seconds("duration"),
        kernel_id=optional_text("kernel_id"),
    )
    client = optional_text("client")
    if client is not None:
        call["client"] = client
    return call
