"""The tool calls a conversation answered, reported to its gateway for the monitor: bounded and
best-effort (a full queue drops a report, a failed send is forgotten; a result never waits)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent

from loomgate.shared.events import TOOL_CALL_TEXT, ToolCallReport, shortened
from loomgate.translator.client.gateway import GatewayClient

log = logging.getLogger("loomgate.translator")

QUEUE_SIZE = 256  # reports waiting to be sent; more are dropped
BATCH_DELAY = 0.1  # seconds a report waits for others to go in the same request
BATCH_SIZE = 100
FLUSH_TIMEOUT = 2.0  # seconds a conversation's end waits for its last reports


def summary_of(result: object) -> tuple[str, bool]:
    """Return a tool result's first lines (shortened) and whether it is an error."""
    if isinstance(result, CallToolResult):
        texts = [c.text for c in result.content if isinstance(c, TextContent)]
        return shortened("\n".join(texts).strip(), TOOL_CALL_TEXT), bool(result.is_error)
    return shortened(str(result), TOOL_CALL_TEXT), False


def argument_texts(arguments: Mapping[str, Any]) -> dict[str, str]:
    """Return the arguments the model gave, each as short text (code cut to its start)."""
    return {
        name: shortened(value if isinstance(value, str) else repr(value))
        for name, value in arguments.items()
        if value is not None
    }


class ToolReports:
    """Queues this conversation's tool call reports and sends them in batches to its gateway."""

    def __init__(self, conversation: str) -> None:
        self.conversation = conversation
        self.client_name: str | None = None  # the MCP host, as its initialize request named it
        self._queue: list[tuple[GatewayClient, ToolCallReport]] = []
        self._sender: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()

    def report(
        self,
        client: GatewayClient | None,
        tool: str,
        arguments: Mapping[str, Any],
        result: object,
        started: float,
        kernel_id: str | None,
    ) -> None:
        """Queue one answered call (dropped when the queue is full or no gateway is known)."""
        if client is None:
            return
        if len(self._queue) >= QUEUE_SIZE:
            return
        summary, error = summary_of(result)
        report = ToolCallReport(
            conversation=self.conversation,
            tool=tool,
            arguments=argument_texts(arguments),
            summary=summary,
            error=error,
            started=started,
            duration=max(0.0, time.time() - started),
            kernel_id=kernel_id,
        )
        if self.client_name:
            report["client"] = self.client_name
        self._queue.append((client, report))
        if self._sender is None:
            self._sender = asyncio.get_running_loop().call_later(BATCH_DELAY, self._send)

    async def flush(self, timeout: float = FLUSH_TIMEOUT) -> None:
        """Send what is queued now and wait (up to `timeout` s, then give up) for every send
        under way."""
        if self._sender is not None:
            self._sender.cancel()
            self._send()
        if self._sending:
            _, late = await asyncio.wait(set(self._sending), timeout=timeout)
            for task in late:
                task.cancel()

    def _send(self) -> None:
        """Start sending what is queued, one request per gateway and batch."""
        self._sender = None
        queued, self._queue = self._queue, []
        by_client: dict[int, tuple[GatewayClient, list[ToolCallReport]]] = {}
        for client, report in queued:
            by_client.setdefault(id(client), (client, []))[1].append(report)
        for client, reports in by_client.values():
            for start in range(0, len(reports), BATCH_SIZE):
                task = asyncio.ensure_future(
                    self._post(client, reports[start : start + BATCH_SIZE])
                )
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)

    async def _post(self, client: GatewayClient, reports: list[ToolCallReport]) -> None:
        try:
            await client.report_tool_calls(reports)
        except Exception as e:  # the monitor misses them; the conversation goes on
            log.debug("tool call reports not delivered: %s", e)
