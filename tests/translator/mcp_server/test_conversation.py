"""One conversation's kernels through the real MCP client against the real gateway: its own
kernel stays its own while it works on another, and comes back when that one is stopped."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from mcp import Client

from tests.support.gateways import GatewayProcess
from tests.support.mcp_clients import conversation, text


async def run(mcp: Client, code: str) -> Any:
    """Call run_cell and return its result."""
    return await mcp.call_tool("run_cell", {"code": code})


async def kernel_model(gateway: GatewayProcess, kernel: str) -> dict[str, Any]:
    """Return the gateway's model of `kernel`."""
    async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers) as http:
        answer = await http.get(f"/api/loomgate/kernels/{kernel}")
        model: dict[str, Any] = answer.json()["kernel"]
        return model


async def test_stopping_the_connected_kernel_goes_back_to_the_conversations_own(
    connect_client: Any, gateway: GatewayProcess
) -> None:
    other = f"elsewhere-{uuid.uuid4().hex[:6]}"
    async with conversation(connect_client) as mcp:
        first = await run(mcp, "conv_var = 'mine'")
        own = first.structured_content["kernel"]
        await mcp.call_tool("connect", {"kernel": other})
        assert text(await run(mcp, "1")).endswith("Out[1]: 1")
        # Still held while the conversation works elsewhere: no grace period runs for it.
        assert (await kernel_model(gateway, own))["holders"] == 1
        stopped = await mcp.call_tool("stop_kernel", {"kernel": other})
        assert not stopped.is_error
        assert text(stopped) == (
            f"Stopped kernel {other}; this conversation is back on its own kernel {own[:8]} "
            "(In [1] last)."
        )
        status = await mcp.call_tool("status", {})
        assert status.structured_content["kernel"]["id"] == own
        waited = await mcp.call_tool("wait", {})
        assert waited.structured_content["kernel"] == own
        assert waited.structured_content["execution"] == 1
        read = await mcp.call_tool("read_output", {"execution": 1})
        assert not read.is_error, text(read)
        again = await run(mcp, "conv_var")
        assert again.structured_content["kernel"] == own
        assert text(again).endswith("Out[2]: 'mine'")


async def test_when_the_own_kernel_is_gone_the_reply_says_what_happens_next(
    connect_client: Any, gateway: GatewayProcess
) -> None:
    other = f"elsewhere-{uuid.uuid4().hex[:6]}"
    async with conversation(connect_client) as mcp:
        own = (await run(mcp, "conv_var = 'mine'")).structured_content["kernel"]
        await mcp.call_tool("connect", {"kernel": other})
        async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers) as http:
            (await http.delete(f"/api/loomgate/kernels/{own}")).raise_for_status()  # a person
        stopped = await mcp.call_tool("stop_kernel", {"kernel": other})
        assert text(stopped) == (
            f"Stopped kernel {other}; this conversation's own kernel {own[:8]} was stopped too, "
            "so the next run_cell starts a new conversation kernel (its records stay readable: "
            f"read_output(kernel='{own[:8]}', execution=N))."
        )
        fresh = await run(mcp, "1")
        assert fresh.structured_content["kernel"] not in (own, other)


async def test_stopping_the_own_kernel_while_elsewhere_keeps_the_current_one(
    connect_client: Any, gateway: GatewayProcess
) -> None:
    other = f"elsewhere-{uuid.uuid4().hex[:6]}"
    async with conversation(connect_client) as mcp:
        own = (await run(mcp, "1")).structured_content["kernel"]
        await mcp.call_tool("connect", {"kernel": other})
        stopped = await mcp.call_tool("stop_kernel", {"kernel": own})
        assert text(stopped) == f"Stopped kernel {own[:8]}; its records stay readable."
        still = await run(mcp, "'here'")
        assert text(still).endswith("Out[1]: 'here'")
        assert (await kernel_model(gateway, still.structured_content["kernel"]))["name"] == other
