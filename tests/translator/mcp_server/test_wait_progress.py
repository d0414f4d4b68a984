"""A tool's wait on a cell is one request to the gateway, with a progress notification each second
beside it, through the real MCP client (in memory: the requests are counted in the translator)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from loomgate.translator.client.session import GatewaySession
from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.gates import Gate
from tests.support.mcp_clients import stop_conversation_kernel

Sent = list[tuple[str, str]]
TICKS = 3  # the cells below run until the third progress notification: 3 seconds


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """The requests (method, path) the translator sends to its gateway, in order."""
    requests: Sent = []
    send = GatewaySession.request

    async def counted(self: GatewaySession, method: str, path: str, **kwargs: Any) -> Any:
        requests.append((method, path))
        return await send(self, method, path, **kwargs)

    monkeypatch.setattr(GatewaySession, "request", counted)
    return requests


KERNELS = pytest.mark.parametrize("kernel", ["conversation", "persistent"])


@contextlib.asynccontextmanager
async def translator(settings: Settings, kernel: str) -> AsyncIterator[Client]:
    """A translator's client whose kernel has run a cell: its conversation kernel (held), or a
    persistent kernel it connected to (not held); stopped afterwards."""
    async with Client(build_server(settings), mode="auto") as client:
        name = f"wait-progress-{uuid.uuid4().hex[:6]}"
        try:
            if kernel == "persistent":
                await client.call_tool("connect", {"kernel": name})
            await client.call_tool("run_cell", {"code": "1"})
            yield client
        finally:
            if kernel == "persistent":
                await client.call_tool("stop_kernel", {"kernel": name})
            await stop_conversation_kernel(client)


class Progress:
    """A progress callback that records each notification and opens `gate` at the TICKS-th."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.seen: list[tuple[float, str]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, message or ""))
        if len(self.seen) == TICKS:
            self.gate.open()


def executions(sent: Sent) -> Sent:
    """Return the requests about executions (a tool call's own report to the monitor aside)."""
    return [(method, path) for method, path in sent if "/executions" in path]


@KERNELS
async def test_run_cell_waits_in_one_request_with_progress_each_second(
    settings: Settings, kernel: str, sent: Sent, gate: Gate
) -> None:
    progress = Progress(gate)
    code = f"print('step', 1, flush=True)\n{gate.wait}"
    async with translator(settings, kernel) as mcp:
        before = len(sent)
        result = await mcp.call_tool(
            "run_cell", {"code": code, "wait_seconds": 60}, progress_callback=progress
        )
        during = executions(sent[before:])
    assert result.structured_content is not None
    assert result.structured_content["state"] == "completed", result
    assert during == [("POST", f"kernels/{result.structured_content['kernel']}/executions")]
    assert [value for value, _ in progress.seen] == [1.0, 2.0, 3.0]  # one each second
    # From the second on, each names the cell (a kernel not held has its stream from 0.5 s on).
    assert [message.split(":")[0] for _, message in progress.seen[1:]] == [
        "In [2] running 2 s",
        "In [2] running 3 s",
    ]


async def test_the_held_kernels_progress_carries_the_line_printed_before(
    settings: Settings, gate: Gate
) -> None:
    progress = Progress(gate)
    code = f"print('step', 1, flush=True)\n{gate.wait}"
    async with translator(settings, "conversation") as mcp:
        await mcp.call_tool(
            "run_cell", {"code": code, "wait_seconds": 60}, progress_callback=progress
        )
    assert [message for _, message in progress.seen] == [
        "In [2] running 1 s: step 1",
        "In [2] running 2 s: step 1",
        "In [2] running 3 s: step 1",
    ]


@KERNELS
async def test_wait_is_one_request_with_progress(
    settings: Settings, kernel: str, sent: Sent, gate: Gate
) -> None:
    progress = Progress(gate)
    async with translator(settings, kernel) as mcp:
        running = await mcp.call_tool("run_cell", {"code": gate.wait, "wait_seconds": 0.2})
        before = len(sent)
        done = await mcp.call_tool("wait", {"wait_seconds": 60}, progress_callback=progress)
        during = executions(sent[before:])
    assert running.structured_content is not None and done.structured_content is not None
    assert running.structured_content["returned"] == "timeout"
    assert done.structured_content["state"] == "completed"
    kernel_id = running.structured_content["kernel"]
    assert during == [("GET", f"kernels/{kernel_id}/executions/current")]
    assert [value for value, _ in progress.seen] == [1.0, 2.0, 3.0]
    assert progress.seen[-1][1] == "In [2] running 3 s"


@KERNELS
async def test_wait_until_silent_returns_in_its_one_request(
    settings: Settings, kernel: str, sent: Sent
) -> None:
    code = "import time\nprint('once', flush=True)\ntime.sleep(60)"
    async with translator(settings, kernel) as mcp:
        running = await mcp.call_tool("run_cell", {"code": code, "wait_seconds": 0})
        before = len(sent)
        silent = await mcp.call_tool(
            "wait", {"execution": 2, "wait_seconds": 60, "until_silent_seconds": 0.5}
        )
        during = executions(sent[before:])
        await mcp.call_tool("interrupt", {})
    assert running.structured_content is not None and silent.structured_content is not None
    assert silent.structured_content["returned"] == "silent"
    assert silent.structured_content["state"] == "running"
    assert during == [("GET", f"kernels/{running.structured_content['kernel']}/executions/2")]
