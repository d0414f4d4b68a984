"""The tools that branch a kernel's state: checkpoint and rollback (SPEC §10)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from loomgate.translator.mcp_server.results import (
    KernelAction,
    KernelInfo,
    text_block,
    tool_result,
)
from loomgate.translator.mcp_server.tool_registry import KernelArg, conversation_of, tool
from loomgate.translator.presentation import checkpoint_note, kernel_label, rollback_note


@tool
async def checkpoint(
    ctx: Context,
    name: Annotated[str | None, Field(description="default after-N, N the latest In [N]")] = None,
    kernel: KernelArg = None,
) -> Annotated[CallToolResult, KernelAction]:
    """Keep a frozen copy of the kernel's state (variables, imports, data) under a name, in
    milliseconds; take one before a risky cell, and rollback() to it after a bad one."""
    conversation = conversation_of(ctx)
    client, ref = await conversation.kernel_ref(kernel)
    reply = await client.checkpoint(ref, name)
    model = reply["kernel"]
    action = KernelAction(action="checkpoint", kernel=KernelInfo.of(model, client.label))
    text = checkpoint_note(kernel_label(model), reply)
    return tool_result([text_block(text)], action, structured=conversation.settings.structured)


@tool
async def rollback(
    to: Annotated[str, Field(min_length=1, description="the checkpoint's name")],
    ctx: Context,
    kernel: KernelArg = None,
) -> Annotated[CallToolResult, KernelAction]:
    """Make the kernel's state the checkpoint's again (also after it died or was reset); records
    and numbering are kept, and the checkpoint stays for another rollback."""
    conversation = conversation_of(ctx)
    client, ref = await conversation.kernel_ref(kernel)
    reply = await client.rollback(ref, to)
    model = reply["kernel"]
    action = KernelAction(action="rollback", kernel=KernelInfo.of(model, client.label))
    text = rollback_note(kernel_label(model), reply["checkpoint"])
    return tool_result([text_block(text)], action, structured=conversation.settings.structured)
