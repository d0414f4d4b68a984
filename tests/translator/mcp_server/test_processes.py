"""The translator as a real process: over stdio and Streamable HTTP, shared by two hosts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from loomgate.translator.mcp_server.settings import MCP_TOKEN_FILE
from tests.support.gateways import GatewayProcess
from tests.support.mcp_clients import ERAS, text
from tests.support.translators import bearer_client, http_translator, stdio


@pytest.mark.parametrize("era", ERAS)
async def test_stdio_round_trip(gateway: GatewayProcess, era: str) -> None:
    async with Client(stdio(gateway), mode=era) as mcp:
        first = await mcp.call_tool("run_cell", {"code": "v = 'kept'"})
        second = await mcp.call_tool("run_cell", {"code": "v"})
        assert first.structured_content["execution"] == 1
        assert text(second).endswith("Out[2]: 'kept'")
        kernel = second.structured_content["kernel"]
        await mcp.call_tool("stop_kernel", {"kernel": kernel})


async def test_two_translators_share_a_persistent_kernel(gateway: GatewayProcess) -> None:
    async with (
        Client(stdio(gateway)) as one,
        Client(stdio(gateway), mode="legacy") as two,
    ):
        await one.call_tool("connect", {"kernel": "shared-numbers"})
        await two.call_tool("connect", {"kernel": "shared-numbers"})
        numbers = []
        for i, mcp in enumerate([one, two, one, two]):
            result = await mcp.call_tool("run_cell", {"code": f"n{i} = {i}"})
            numbers.append(result.structured_content["execution"])
        assert numbers == [1, 2, 3, 4]
        seen = await two.call_tool("run_cell", {"code": "n0 + n1 + n2 + n3"})
        assert text(seen).endswith("Out[5]: 6")
        await one.call_tool("stop_kernel", {"kernel": "shared-numbers"})


def kept_token(state_dir: Path) -> str:
    """Return the bearer token a `loomgate-mcp` over HTTP keeps in `state_dir`."""
    return (state_dir / MCP_TOKEN_FILE).read_text().strip()


@pytest.mark.parametrize("era", ERAS)
async def test_streamable_http(gateway: GatewayProcess, era: str, tmp_path: Path) -> None:
    async with (
        http_translator(gateway, tmp_path) as served,
        bearer_client(served.url, kept_token(tmp_path), era) as mcp,
    ):
        result: Any = await mcp.call_tool("run_cell", {"code": "'over http'"})
        assert text(result).endswith("Out[1]: 'over http'")
        await mcp.call_tool("stop_kernel", {"kernel": result.structured_content["kernel"]})


async def test_streamable_http_sessions_share_one_conversation(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    async with (
        http_translator(gateway, tmp_path) as served,
        bearer_client(served.url, kept_token(tmp_path), "legacy") as first,
        bearer_client(served.url, kept_token(tmp_path), "legacy") as second,
    ):
        assert "shares one conversation" in (first.instructions or "")
        made: Any = await first.call_tool("run_cell", {"code": "shared = 'yes'"})
        seen: Any = await second.call_tool("run_cell", {"code": "shared"})
        assert text(seen).endswith("Out[2]: 'yes'")
        shared_kernel = made.structured_content["kernel"]
        assert seen.structured_content["kernel"] == shared_kernel
        # A connect in one session moves them all (the instructions say so) ...
        await second.call_tool("connect", {"kernel": "apart-b"})
        moved: Any = await first.call_tool("run_cell", {"code": "'where'"})
        own_kernel = moved.structured_content["kernel"]
        assert own_kernel != shared_kernel
        assert "moves every session" in (first.instructions or "")
        # ... and kernel= on a call works apart from the current kernel.
        apart: Any = await first.call_tool("run_cell", {"code": "shared", "kernel": shared_kernel})
        assert text(apart).endswith("Out[3]: 'yes'")
        assert apart.structured_content["kernel"] == shared_kernel
        for kernel in (shared_kernel, own_kernel):
            await first.call_tool("stop_kernel", {"kernel": kernel})
