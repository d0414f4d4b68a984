"""MCP clients of real translators: the protocol eras and transports, and tidy conversations."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcp import Client

ERAS = ["legacy", "auto"]  # the initialize handshake era, and 2026-07-28
# The tools' tests run in each era in memory and in the current era over stdio: the SDK's era
# is the same over both transports, and test_processes runs both eras over stdio.
CLIENT_KINDS = [("legacy", "memory"), ("auto", "memory"), ("auto", "stdio")]


@contextlib.asynccontextmanager
async def conversation(connect_client: Callable[..., Client]) -> AsyncIterator[Client]:
    """An MCP client of a fresh translator; its conversation kernel is stopped afterwards."""
    async with connect_client() as client:
        try:
            yield client
        finally:
            await stop_conversation_kernel(client)


async def stop_conversation_kernel(client: Client) -> None:
    """Stop the kernel the conversation used, if any (tests leave no kernels behind)."""
    listing = await client.call_tool("list_kernels", {})
    data = listing.structured_content or {}
    if data.get("current"):
        await client.call_tool("stop_kernel", {"kernel": data["current"]})


def text(result: Any) -> str:
    """Return all text content of a tool result, joined."""
    return "\n".join(block.text for block in result.content if block.type == "text")
