"""Endpoints for the monitor: the monitor token to whoever holds the full token, and the tool
calls translators report (kept in monitor/tool_calls.py). Each is a function of the call,
answering (status, body) or raising a Refusal."""

from __future__ import annotations

from loomgate.gateway.errors import BadRequest
from loomgate.gateway.handlers.answers import Answer
from loomgate.gateway.handlers.call import Call
from loomgate.gateway.monitor.tool_calls import KEPT, MAX_REPORTS, ToolCallLog, checked
from loomgate.shared import wire
from loomgate.shared.events import ToolCallList


async def monitor_access(call: Call) -> Answer:
    """GET monitor: the monitor token (None when this server has none). Its route is not
    monitor-readable, so the monitor token itself is refused here."""
    identity = call.settings["serverapp"].identity_provider
    token = getattr(identity, "monitor_token", "") or None
    return 200, wire.MonitorAccess(monitor_token=token)


def tool_call_log(call: Call) -> ToolCallLog:
    """Return the gateway's tool call log."""
    log: ToolCallLog = call.settings["loomgate_tool_calls"]
    return log


async def list_tool_calls(call: Call) -> Answer:
    """GET tool-calls[?since=id&conversation=label&limit=n]: the kept calls after `since` (at
    most `limit`, oldest first)."""
    after = call.int_arg("since", 0)
    limit = call.int_arg("limit", 200, lo=1, hi=KEPT)
    conversation = call.text_arg("conversation")
    return 200, ToolCallList(tool_calls=tool_call_log(call).since(after, conversation, limit))


async def report_tool_calls(call: Call) -> Answer:
    """POST tool-calls {tool_calls: [...]}: keep the reported calls (202), what a translator
    answered, for the monitor to show."""
    reports = call.body.get("tool_calls")
    if not isinstance(reports, list) or not 1 <= len(reports) <= MAX_REPORTS:
        raise BadRequest(f"tool_calls must be a list of 1 to {MAX_REPORTS} reports")
    if not all(isinstance(report, dict) for report in reports):
        raise BadRequest("each of tool_calls must be an object")
    checked_calls = [checked(report) for report in reports]  # all or none
    log = tool_call_log(call)
    return 202, ToolCallList(tool_calls=[log.add(kept) for kept in checked_calls])
